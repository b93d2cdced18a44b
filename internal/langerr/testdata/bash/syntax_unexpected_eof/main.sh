if [ -n "$HOME" ]; then
  echo yes
