"""What the tools need of security: certificates for a secure local cluster, and the client
properties files (``--command-config``) the CLIs read."""
