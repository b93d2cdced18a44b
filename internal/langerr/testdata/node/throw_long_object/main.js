throw {
  code: "E_VALIDATION",
  field: "email",
  detail: "the address must contain an @ sign and a domain name",
  nested: { a: [1, 2, 3] },
};
