"""A third chat channel, a loopback one, made the way a real one is: its kind (kind.py) and its
adapter (channel.py), nothing else. Registered with one line by the test that uses it
(tests/test_toy_channel.py); the core is asked to know nothing more of it."""
