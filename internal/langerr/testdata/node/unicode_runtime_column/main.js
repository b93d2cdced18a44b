const s = "😀😀 héllo"; const t = s.x.y;
