"""Mints the RS256 access token of the benchmark's AUTH=jwt runs and writes the JWKS the gateway verifies it with.

    mint_jwt.py PRIVATE_KEY_DER JWKS_OUT  ->  prints the token

The key is the test fixture tests/fixtures/auth-rsa-1.der (test-only material). The token is valid for an hour,
for issuer https://issuer.bench.invalid and audience switchyard-bench, matching the [auth.jwt] run.sh writes.
Needs PyJWT and cryptography (both in the interop venv, target/interop-venv).
"""

import json
import sys
import time

import jwt
from cryptography.hazmat.primitives import serialization
from jwt.algorithms import RSAAlgorithm

KID = "bench-1"


def main() -> None:
    key_path, jwks_path = sys.argv[1], sys.argv[2]
    with open(key_path, "rb") as file:
        private_key = serialization.load_der_private_key(file.read(), password=None)
    public = json.loads(RSAAlgorithm.to_jwk(private_key.public_key()))
    public.update({"kid": KID, "use": "sig", "alg": "RS256"})
    with open(jwks_path, "w", encoding="utf-8") as file:
        json.dump({"keys": [public]}, file)
    now = int(time.time())
    claims = {"iss": "https://issuer.bench.invalid", "aud": "switchyard-bench", "sub": "bench", "iat": now,
              "exp": now + 3600}
    print(jwt.encode(claims, private_key, algorithm="RS256", headers={"kid": KID}))


if __name__ == "__main__":
    main()
