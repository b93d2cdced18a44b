throw null;
