"""The chats' queues, which never stop: each chat's inbox answered in order (chat_queues),
its outbox sent in order (courier, replies), both on one serial worker per chat
(keyed_worker), and a message no model answered tried again later (outage)."""
