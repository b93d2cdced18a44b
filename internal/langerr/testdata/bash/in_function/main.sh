set -u
greet() {
  echo "hello $1"
}
greet
