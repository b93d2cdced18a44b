function f(x) {
    if (x) {
        return x +* 2;
    }
}
