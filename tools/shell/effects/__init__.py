"""What a command changes, read before it runs: the files it replaces, deletes or creates,
git's and archives' too."""
