"""Built-in chat commands, answered at once and without the model (not behind the chat's
running turn): /new, /stop, /status, /busy, /voice, /help, /pair
(agent/runtime/owner/pair_command.py) and the owner's controls /usage, /budget, /model
(agent/runtime/owner/owner_commands.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from agent.conversation.scopes import audience_of
from agent.durable.inbox import Inbox
from agent.durable.owner.chat_voices import MODES, ChatVoices
from agent.durable.sessions import SessionStore
from agent.durable.store import Store
from agent.model.responses import ProviderHealth
from agent.runtime.jobs.job_runner import JobRunner
from agent.runtime.jobs.job_texts import jobs_text
from agent.runtime.owner import owner_commands
from agent.runtime.owner.doorkeeper import Doorkeeper
from agent.runtime.owner.metering import OwnerControls
from agent.runtime.owner.pair_command import pair_command
from agent.runtime.queues.busy import BusyModes, busy_command
from agent.runtime.running_turns import FORGET, STOP, TURNS, RunningTurns
from agent.runtime.turn_setup import TurnSetup
from agent.turns.turn_record import TurnRecord
from channels.base import IncomingMessage
from channels.capabilities import CHAT_COMMANDS
from channels.config import VoiceReply

HELP = (
    "Commands:\n"
    "/new — start a fresh conversation (the bot forgets this chat's history)\n"
    "/stop — stop the answer being worked on, and this chat's jobs\n"
    "/jobs — this chat's sub-agent jobs (delegate): running and finished\n"
    "/status — model and its health, waiting messages, tokens and cost of the last answer\n"
    "/model — the models this chat may use; /model NAME switches it, /model reset goes back\n"
    "/voice — replies as voice notes here: /voice always, when_spoken_to, never or reset\n"
    "/usage — tokens and cost today and this month (the owner, privately)\n"
    "/budget — the spending limits; /budget daily 5 sets one (the owner, privately)\n"
    "/busy — what a message does while I work: /busy queue (waits), steer (joins the running "
    "answer), interrupt (stops it; both answered together), collect (answered together); "
    "/busy reset\n"
    "/pair — who may talk to me: /pair approve CODE, /pair deny CODE, /pair invite, /pair here "
    "in a group (the owner)\n"
    "/help — this list\n"
    "Anything else is a message for the assistant."
)
COMMANDS = dict(CHAT_COMMANDS)


@dataclass(frozen=True)
class CommandContext:
    """What a command may see and touch: one chat's session, its last turn, its running turn."""

    chat_key: str
    sessions: SessionStore
    model: str
    last_turn: TurnRecord | None
    # stops the chat's running turn (with keep=False nothing of it is stored); False: none runs
    cancel: Callable[..., Awaitable[bool]]
    inbox: Inbox
    health: ProviderHealth
    history_budget: int  # tokens of earlier turns a turn may send
    controls: OwnerControls | None = None  # usage, budget, chat models (None: not kept here)
    owner: bool = False  # the owner, in their private chat or the terminal
    sender: str = ""  # who wrote the command, as /model keeps it
    asking: Callable[[], int] = lambda: 0  # approval questions waiting, on every channel
    jobs: JobRunner | None = None  # the channel's jobs (None: none run here)
    voices: ChatVoices | None = None  # each chat's /voice choice (None: not kept here)
    voice_default: VoiceReply = "never"  # [voice] reply


def parse_command(text: str) -> str | None:
    """`/status` or `/status@my_bot` -> "status"; anything else -> None."""
    words = text.strip().split()
    if not words or not words[0].startswith("/"):
        return None
    name = words[0][1:].split("@", 1)[0].lower()
    return name if name in COMMANDS else None


class ChatCommands:
    """One channel's commands, each with what it may see of the chat."""

    def __init__(
        self,
        setup: TurnSetup,
        store: Store,
        turns: RunningTurns,
        controls: OwnerControls,
        door: Doorkeeper,
        asking: Callable[[], int],
        busy: BusyModes,
        *,
        jobs: JobRunner | None = None,
    ) -> None:
        self._jobs = jobs
        self._setup = setup
        self._store = store
        self._turns = turns
        self._controls = controls
        self._door = door
        self._asking = asking
        self._busy = busy

    async def answer(self, msg: IncomingMessage, *, in_chat: bool) -> str | None:
        """The command's answer; None when `msg` is no command. `in_chat`: a chat channel's
        message, where /pair works (the terminal has `agent pairing` instead)."""
        name = parse_command(msg.text)
        if name is None:
            return None
        if name == "pair" and in_chat:
            return await pair_command(self._door, msg)
        if name == "busy" and in_chat:
            return await busy_command(self._busy, msg)
        return await run_command(name, msg.text, self._context(msg))

    def _context(self, msg: IncomingMessage) -> CommandContext:
        key, setup = msg.chat.key, self._setup
        return CommandContext(
            key,
            self._store.sessions,
            setup.llm.model,
            self._turns.last.get(key),
            lambda keep=True: self._stop(key, keep=keep),
            self._store.inbox,
            setup.llm.health,
            setup.history_tokens,
            controls=self._controls,
            owner=audience_of(msg, setup.settings.people).owner_private,
            sender=msg.sender_name or msg.sender_id,
            asking=self._asking,
            jobs=self._jobs,
            voices=ChatVoices(self._store.db),
            voice_default=setup.settings.voice.reply,
        )

    async def _stop(self, key: str, *, keep: bool = True) -> bool:
        """Stop the chat's running turn and its jobs; False when nothing ran. With the store
        shared, a turn or job another process runs is told to stop there (and a job is
        marked in the store too, for a process that misses the announcement). `keep`
        False (/new): the stopped turn stores nothing, which would land in the new session."""
        jobs, claims, turns = self._jobs, self._store.claims, self._turns
        elsewhere = False
        if claims.shared:  # first: what stops here is then answered "Stopping." before its end
            elsewhere = bool(jobs and await jobs.stop_elsewhere(key))
            elsewhere = elsewhere or await claims.held_elsewhere(TURNS, key)
            if elsewhere:
                await claims.announce(STOP if keep else FORGET, key)
        stopped_jobs = jobs.stop_chat(key) if jobs else 0
        stopped = turns.cancel(key) if keep else turns.forget(key)
        return stopped or stopped_jobs > 0 or elsewhere


async def run_command(name: str, text: str, ctx: CommandContext) -> str:
    """Command `name` (parse_command's), typed as `text`, answered."""
    if name == "new":
        await ctx.cancel(keep=False)
        await ctx.sessions.new_session(ctx.chat_key)
        return "Started a fresh conversation."
    if name == "stop":
        return "Stopping." if await ctx.cancel() else "Nothing is running."
    if name == "status":
        return await _status(ctx)
    if name == "jobs":
        if ctx.jobs is None:
            return "No jobs run here."
        return jobs_text(await ctx.jobs.kit.jobs.listed(ctx.chat_key))
    if name == "busy":  # a chat channel's runtime answers it (busy_command)
        return "The terminal waits for each answer; /busy is for the chat channels."
    if name == "pair":  # a chat channel's runtime answers it (agent/runtime/owner/pair_command.py)
        return "Pairing is for the chat channels; here: agent pairing list | approve | deny."
    if name in ("usage", "budget", "model"):
        return await _controls(name, text.split()[1:], ctx)
    if name == "voice":
        return await _voice(text.split()[1:], ctx)
    return HELP


async def _voice(args: list[str], ctx: CommandContext) -> str:
    """/voice: this chat's choice shown, set (`/voice always`) or dropped (`/voice reset`)."""
    voices, configured = ctx.voices, ctx.voice_default
    usage = "/voice always | when_spoken_to | never | reset"
    if voices is None:
        return "Voice replies are for the chat channels."
    if not args:
        own = await voices.get(ctx.chat_key)
        said = f"{own} (this chat's choice)" if own else f"{configured} (the default)"
        return f"Voice replies here: {said}. {usage}"
    wanted = args[0].lower()
    if wanted == "reset" and len(args) == 1:
        await voices.reset(ctx.chat_key)
        return f"Voice replies here follow the default again: {configured}."
    if wanted not in MODES or len(args) > 1:
        return f"Not a voice setting: {' '.join(args)}. {usage}"
    await voices.choose(ctx.chat_key, wanted, ctx.sender)
    return f"Voice replies here: {wanted}."


async def _controls(name: str, args: list[str], ctx: CommandContext) -> str:
    controls = ctx.controls
    if controls is None:
        return f"/{name} is not available here."
    if name == "model":
        return await owner_commands.model_text(controls, ctx.chat_key, ctx.model, args, ctx.sender)
    if not ctx.owner:
        return owner_commands.OWNER_ONLY.format(name=name)
    if name == "usage":
        return await owner_commands.usage_text(controls)
    return await owner_commands.budget_text(controls, args)


async def _status(ctx: CommandContext) -> str:
    count = await ctx.sessions.count(ctx.chat_key)
    waiting = await ctx.inbox.waiting(ctx.chat_key)
    recent = await ctx.sessions.recent(ctx.chat_key)
    tokens = sum(ctx.sessions.tokens(m) for turn in recent.turns for m in turn.messages)
    summary = "; earlier turns summarised" if recent.summary else ""
    model = ctx.model
    if ctx.controls is not None:
        model = await ctx.controls.model_of(ctx.chat_key, ctx.model)
    lines = [
        f"Model: {model} ({ctx.health.describe()})",
        f"Conversation: {count} messages; waiting to be answered: {waiting}",
        f"History: about {tokens:,} of {ctx.history_budget:,} tokens{summary}",
    ]
    last = ctx.last_turn
    if last is None:
        lines.append("Last answer: none yet")
    else:
        cost = "unknown" if last.cost_usd is None else f"${last.cost_usd:.4f}"
        lines.append(
            f"Last answer: {last.prompt_tokens} prompt + {last.completion_tokens} completion "
            f"tokens, cost {cost}, ended: {last.stop_reason}"
        )
    if ctx.owner:  # each such turn holds no slot while it waits
        lines.append(f"Approval questions waiting for an answer: {ctx.asking()}")
    return "\n".join(lines)
