foo_missing
ls /nope
