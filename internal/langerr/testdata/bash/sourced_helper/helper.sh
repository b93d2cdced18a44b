helper_fn() {
  not_a_command_xyz
}
