set -e
ls /nope
