"""Bot API methods of the Telegram double (all but getUpdates, which ``UpdateQueue`` answers).

Each handler takes the request's parameters and returns the ``result`` or raises ``ApiError``
with Telegram's wording. They run with ``TelegramState.lock`` held, and record what a user
would see in ``state.sent`` (one ``SentMessage`` per bot message, edits applied in place).
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable
from typing import Any

from fakes.ogg_opus import opus_problem
from fakes.telegram_files import StoredFile, file_json
from fakes.telegram_models import (
    ACTIONS,
    BOT_ID,
    BOT_USER,
    MEDIA,
    NOT_MODIFIED,
    REACTIONS,
    ApiError,
    CallbackAnswer,
    ChatAction,
    SentMessage,
    Upload,
    chat_id_param,
    int_param,
    json_param,
    render,
)
from fakes.telegram_state import TelegramState

__all__ = ["Method", "Methods"]

Method = Callable[[dict[str, Any]], Any]


def _true(_params: dict[str, Any]) -> bool:
    return True


class Methods:
    """The method table (lower-case names, as Telegram matches them) and its handlers."""

    def __init__(self, state: TelegramState, drop_pending: Callable[[], None]) -> None:
        """``drop_pending``: forget queued updates (``deleteWebhook(drop_pending_updates)``)."""
        self._state = state
        self._drop_pending = drop_pending
        self._table: dict[str, Method] = {
            "getme": lambda _p: dict(BOT_USER, can_join_groups=True),
            "deletewebhook": self._delete_webhook,
            "setwebhook": self._set_webhook,
            "setmycommands": self._set_commands,
            "getmycommands": lambda _p: [dict(c) for c in self._state.commands],
            "sendmessage": self._send_message,
            "editmessagetext": self._edit_message_text,
            "editmessagereplymarkup": self._edit_reply_markup,
            "sendchataction": self._send_chat_action,
            "setmessagereaction": self._set_reaction,
            "getfile": self._get_file,
            "deletemessage": self._delete_message,
            "answercallbackquery": self._answer_callback_query,
            "close": _true,
            "logout": _true,
        }
        for name in MEDIA:
            self._table[name.lower()] = functools.partial(self._send_media, name)

    def get(self, method: str) -> Method | None:
        """The handler for ``method`` (any case), None if this fake does not know it."""
        return self._table.get(method.lower())

    def _delete_webhook(self, params: dict[str, Any]) -> bool:
        if str(params.get("drop_pending_updates", "")).lower() == "true":
            self._drop_pending()
        self._state.webhook = None
        return True

    def _set_webhook(self, params: dict[str, Any]) -> bool:
        """Kept, not called: a test posts the updates itself with the secret token."""
        url, secret = str(params.get("url", "")), str(params.get("secret_token", ""))
        if not url.startswith("https://"):
            raise ApiError(
                400, "Bad Request: bad webhook: An HTTPS URL must be provided for webhook"
            )
        if secret and not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", secret):
            raise ApiError(400, "Bad Request: secret token contains unallowed characters")
        allowed = json_param(params, "allowed_updates")
        self._state.webhook = {"url": url, "secret_token": secret, "allowed_updates": allowed}
        return True

    def _set_commands(self, params: dict[str, Any]) -> bool:
        commands = json_param(params, "commands")
        if not isinstance(commands, list):
            raise ApiError(400, 'Bad Request: parameter "commands" is required')
        for c in commands:
            name, desc = str(c.get("command", "")), str(c.get("description", ""))
            if not re.fullmatch(r"[a-z0-9_]{1,32}", name) or not 1 <= len(desc) <= 256:
                raise ApiError(400, "Bad Request: BOT_COMMAND_INVALID")
        self._state.commands = [
            {"command": c["command"], "description": c["description"]} for c in commands
        ]
        return True

    def _send_message(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id, text = chat_id_param(params), str(params.get("text") or "")
        plain, entities = render(params, text, caption=False)
        msg = self._outgoing(chat_id, params)
        msg.update({"text": plain, **({"entities": entities} if entities else {})})
        self._record("sendMessage", msg, params, text=text, plain=plain)
        return msg

    def _send_media(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        kind, _, _, mime = MEDIA[method]
        chat_id, value = chat_id_param(params), params.get(kind)
        caption = str(params.get("caption") or "")
        plain, ents = render(params, caption, caption=True)
        files = self._state.files
        ref: str | None = None
        file: StoredFile
        if isinstance(value, Upload):
            if not value.data:
                raise ApiError(400, "Bad Request: file must be non-empty")
            if method == "sendVoice" and (problem := opus_problem(value.data)):
                raise ApiError(400, f"Bad Request: VOICE_INVALID ({problem})")  # OGG/Opus only
            file = files.store(kind, value.data, value.filename, value.content_type or mime)
        elif isinstance(value, str) and (known := files.get(value)) is not None:
            ref, file = value, known
        elif isinstance(value, str) and re.match(r"https?://", value):
            ref, file = value, files.store(kind, b"", None, mime)
        elif not value:
            raise ApiError(400, f"Bad Request: there is no {kind} in the request")
        else:
            raise ApiError(400, "Bad Request: wrong file identifier/HTTP URL specified")
        msg = self._outgoing(chat_id, params)
        msg.update(files.media(kind, file, params))
        if plain:
            msg.update({"caption": plain, **({"caption_entities": ents} if ents else {})})
        data = value.data if isinstance(value, Upload) else None
        name = value.filename if isinstance(value, Upload) else file.name
        fields = {"text": caption or None, "plain": plain or None, "filename": name}
        self._record(method, msg, params, data=data, file_ref=ref, **fields)
        return msg

    def _editable(self, params: dict[str, Any]) -> dict[str, Any]:
        """The bot's message named by chat_id and message_id, or Telegram's 400."""
        key = (chat_id_param(params), int_param(params, "message_id") or 0)
        msg = self._state.messages.get(key)
        if msg is None:
            raise ApiError(400, "Bad Request: message to edit not found")
        if msg["from"]["id"] != BOT_ID:
            raise ApiError(400, "Bad Request: message can't be edited")
        return msg

    def _edit_message_text(self, params: dict[str, Any]) -> dict[str, Any]:
        """New text; the inline keyboard is replaced by ``reply_markup``, or removed without
        one, as on Telegram."""
        chat_id, text = chat_id_param(params), params.get("text")
        msg = self._editable(params)
        if "text" not in msg:
            raise ApiError(400, "Bad Request: there is no text in the message to edit")
        plain, entities = render(params, str(text or ""), caption=False)
        markup = json_param(params, "reply_markup")
        before = (msg["text"], msg.get("entities", []), msg.get("reply_markup"))
        if (plain, entities, markup) == before:
            raise ApiError(400, NOT_MODIFIED)
        for key, value in (("entities", entities), ("reply_markup", markup)):
            msg.pop(key, None)
            if value:
                msg[key] = value
        msg.update(text=plain, edit_date=int(time.time()))
        record = self._state.records.get((chat_id, msg["message_id"]))
        if record is not None:
            record.edits.append(record.text)
            record.text, record.plain = str(text), plain
            record.parse_mode = params.get("parse_mode")
            record.reply_markup = msg.get("reply_markup")
        return msg

    def _edit_reply_markup(self, params: dict[str, Any]) -> dict[str, Any]:
        """Replace the inline keyboard; without ``reply_markup`` it is removed."""
        msg = self._editable(params)
        markup = json_param(params, "reply_markup") or None
        if markup is not None and "inline_keyboard" not in markup:
            raise ApiError(400, "Bad Request: inline keyboard expected")
        if markup == msg.get("reply_markup"):
            raise ApiError(400, NOT_MODIFIED)
        msg.pop("reply_markup", None)
        if markup is not None:
            msg["reply_markup"] = markup
        msg["edit_date"] = int(time.time())
        record = self._state.records.get((msg["chat"]["id"], msg["message_id"]))
        if record is not None:
            record.reply_markup = markup
        return msg

    def _answer_callback_query(self, params: dict[str, Any]) -> bool:
        """Each button press is answered at most once; the toast is at most 200 characters."""
        query_id = str(params.get("callback_query_id") or "")
        user_id = self._state.queries.pop(query_id, None)
        if user_id is None:
            raise ApiError(
                400,
                "Bad Request: query is too old and response timeout expired or query ID is invalid",
            )
        text = params.get("text")
        if text is not None and len(str(text)) > 200:
            raise ApiError(400, "Bad Request: MESSAGE_TOO_LONG")
        alert = str(params.get("show_alert", "")).lower() == "true"
        answer = CallbackAnswer(query_id, user_id, None if text is None else str(text), alert)
        self._state.callback_answers.append(answer)
        return True

    def _send_chat_action(self, params: dict[str, Any]) -> bool:
        action = str(params.get("action") or "")
        chat_id = chat_id_param(params)
        if not ACTIONS.fullmatch(action):
            raise ApiError(400, "Bad Request: wrong parameter action in request")
        thread = int_param(params, "message_thread_id")
        self._state.actions.append(ChatAction(chat_id, action, thread))
        return True

    def _set_reaction(self, params: dict[str, Any]) -> bool:
        """The bot's one reaction on a message (it replaces the last; none clears it)."""
        key = (chat_id_param(params), int_param(params, "message_id") or 0)
        if key not in self._state.messages:
            raise ApiError(400, "Bad Request: message to react not found")
        given = json_param(params, "reaction") or []
        if len(given) > 1:
            raise ApiError(400, "Bad Request: REACTIONS_TOO_MANY")
        emoji = [str(item.get("emoji") or "") for item in given if item.get("type") == "emoji"]
        if len(emoji) != len(given) or any(e not in REACTIONS for e in emoji):
            raise ApiError(400, "Bad Request: REACTION_INVALID")
        self._state.reactions.append((key[0], key[1], emoji[0] if emoji else ""))
        return True

    def _get_file(self, params: dict[str, Any]) -> dict[str, Any]:
        file = self._state.files.get(str(params.get("file_id") or ""))
        if file is None:
            raise ApiError(400, "Bad Request: invalid file_id")
        if file.length > 20 * 1024 * 1024:
            raise ApiError(400, "Bad Request: file is too big")
        return {**file_json(file), "file_path": file.path}

    def _delete_message(self, params: dict[str, Any]) -> bool:
        key = (chat_id_param(params), int_param(params, "message_id") or 0)
        if self._state.messages.pop(key, None) is None:
            raise ApiError(400, "Bad Request: message to delete not found")
        if key in self._state.records:
            self._state.records[key].deleted = True
        return True

    # -- helpers ------------------------------------------------------------------------------

    def _outgoing(self, chat_id: int | str, params: dict[str, Any]) -> dict[str, Any]:
        """A new bot message, checking the reply target first as Telegram does."""
        reply = json_param(params, "reply_parameters") or {}
        reply_to = reply.get("message_id", int_param(params, "reply_to_message_id"))
        messages = self._state.messages
        target = messages.get((chat_id, int(reply_to))) if reply_to is not None else None
        lenient = reply.get("allow_sending_without_reply") or params.get(
            "allow_sending_without_reply"
        )
        if reply_to is not None and target is None and str(lenient).lower() != "true":
            raise ApiError(400, "Bad Request: message to be replied not found")
        thread = int_param(params, "message_thread_id")
        msg = self._state.new_message(chat_id, thread, BOT_USER)
        if target is not None:
            msg["reply_to_message"] = {k: v for k, v in target.items() if k != "reply_to_message"}
        markup = json_param(params, "reply_markup")
        if isinstance(markup, dict) and "inline_keyboard" in markup:
            msg["reply_markup"] = markup
        return msg

    def _record(
        self, method: str, msg: dict[str, Any], params: dict[str, Any], **fields: Any
    ) -> None:
        reply = msg.get("reply_to_message", {}).get("message_id")
        record = SentMessage(
            method=method,
            chat_id=msg["chat"]["id"],
            message_id=msg["message_id"],
            parse_mode=params.get("parse_mode"),
            reply_to_message_id=reply,
            message_thread_id=msg.get("message_thread_id"),
            reply_markup=json_param(params, "reply_markup"),
            params={k: v for k, v in params.items() if not isinstance(v, Upload)},
            **fields,
        )
        self._state.sent.append(record)
        self._state.records[(record.chat_id, record.message_id)] = record
