import sys
from pathlib import Path

from cli.security.certs import CertificateAuthority

config, user = Path(sys.argv[1]), sys.argv[2]
ca = CertificateAuthority.load(config / "ca.pem", config / "ca.key")
keystore = ca.issue(f"CN={user},OU=users,O=tiered").write_pem_files(config, user).keystore
properties = config / f"{user}.properties"
properties.write_text(
    f"security.protocol=SSL\nssl.truststore.location={config / 'ca.pem'}\n"
    f"ssl.keystore.type=PEM\nssl.keystore.location={keystore}\n"
)
print(f"{user}: {keystore} (principal User:CN={user},OU=users,O=tiered), {properties}")
