import sys
sys.exit("fatal: config missing")
