x=1
if [[ $x -eq ]]; then
  echo yes
fi
