"""Who is asking, and may they: principals (``principal``), and the parts built on them (TLS,
SASL/SCRAM, the ACL authorizer) per docs/operations/security.md."""
