set -e
cd /nope
echo unreachable
