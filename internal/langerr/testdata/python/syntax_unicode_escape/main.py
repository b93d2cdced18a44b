p = "C:\Users\name"
