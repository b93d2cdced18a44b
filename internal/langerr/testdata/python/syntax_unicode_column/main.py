s = "héllo wörld"; t = s +* 2
