set -e
false
