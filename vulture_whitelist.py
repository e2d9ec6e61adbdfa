"""Names vulture cannot see used: read by a library or by the kernel, not by our code.

Vulture reads this file with agent/, channels/ and tools/ (.ci/run); it is never imported.
Click commands and pydantic validators (decorators), `model_config` and the pin tools'
`recheck_*` methods (found with getattr) are left out by .ci/run's flags instead.
"""

# ruff: noqa: B018, F821

# click.Group's hook: click calls it to list the subcommands in --help (agent/cli/main.py).
_.format_commands
# pydantic-settings calls this hook with every source by keyword (agent/config.py).
_.settings_customise_sources
env_settings, dotenv_settings, file_secret_settings
# The rules json's C scanner reads from its context object (agent/cli/local_client.py).
_.strict, _.object_hook, _.object_pairs_hook, _.parse_float, _.parse_int, _.parse_constant
# LiteLLM's module flags, read by LiteLLM (agent/model/profiles/litellm_import.py).
_.telemetry, _.suppress_debug_info
# discord.py reads these: VoiceClient's warnings and the gateway intents (channels/discord).
_.warn_nacl, _.warn_dave, _.guilds, _.guild_messages, _.dm_messages, _.message_content
# pyfirmata2.Board's state, set without its __init__, and the handlers it calls by name
# (tools/board/pyfirmata_adapter.py).
_.samplerThread, _._layout, _._command_handlers, _.digital, _.digital_ports
_._handle_digital_message, _._handle_analog_message
# Landlock's filesystem rights: the kernel's bit layout, all handled through fs_rights'
# mask (tools/sandbox/landlock.py).
REMOVE_DIR, REMOVE_FILE, MAKE_DIR, MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_SYM
# io.RawIOBase.read calls it (tools/shell/archives.py's bounded reader).
_.readinto
# shlex.shlex reads it while splitting (tools/shell/full_mode.py).
_.whitespace_split
# html.parser.HTMLParser calls it with each run of text (tools/web/search_providers.py).
_.handle_data
# inspect.signature reads it: a tool offered without its `board` argument with one board
# (tools/board/pin_names.py).
_.__signature__
# psycopg reads these: the cursor class a connection makes (its raw cursor: `$1` placeholders)
# and a sqlite3 connection's transaction mode (agent/durable/postgres/).
_.cursor_factory, _.isolation_level
