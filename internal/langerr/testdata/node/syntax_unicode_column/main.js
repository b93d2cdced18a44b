const s = "héllo wörld 😀"; const t = s +* 2;
