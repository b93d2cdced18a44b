class Account {
  withdraw(n) {
    if (n > 10) throw new RangeError(`cannot withdraw ${n}`);
  }
}
new Account().withdraw(50);
