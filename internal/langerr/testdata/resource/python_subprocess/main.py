import subprocess
procs = [subprocess.Popen(["sleep", "2"]) for _ in range(50)]
