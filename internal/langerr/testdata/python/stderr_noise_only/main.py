import sys
print("usage: tool [options]", file=sys.stderr)
sys.exit(2)
