readonly LIMIT=3
LIMIT=4
