source ./helper.sh
helper_fn
