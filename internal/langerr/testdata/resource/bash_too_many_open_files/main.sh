for i in $(seq 1 24); do exec {fd}</dev/null; done
