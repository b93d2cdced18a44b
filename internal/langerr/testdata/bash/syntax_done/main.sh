for i in 1 2 3
  echo $i
done
