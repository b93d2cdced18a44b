set -e
sh -c 'kill -SEGV $$'
