#!/usr/bin/env python3
"""The CPU floor of Web Push message encryption (RFC 8291) on this machine, from `openssl speed`.

Each message costs, in OpenSSL:
  - one P-256 key generation (the ephemeral key): a fixed-base scalar multiplication. `openssl
    speed` has no keygen row; ECDSA P-256 signing (a fixed-base multiplication plus an inversion)
    stands in for it, slightly high;
  - one ECDH derivation with the subscription's key (`openssl speed ecdhp256`): a variable-base
    multiplication, the largest part;
  - three HKDF-SHA-256 calls (six HMACs over at most 208 bytes, about 36 SHA-256 blocks), estimated
    from `openssl speed -evp sha256` on 64-byte buffers (two blocks a call);
  - AES-128-GCM over the payload plus the delimiter (`openssl speed -evp aes-128-gcm -bytes N`).
The VAPID signature is one per push-service origin every few hours, so it is left out.

It prints each part in microseconds and the messages a second one core could encrypt at best.
Usage: python3 Benchmarks/webpush-crypto-floor.py [--seconds S] [--openssl PATH]
"""

import argparse
import subprocess
import sys

SIZES = (256, 4010)  # a typical rendered payload, and the largest record (3,993 + 1 + 16)
HKDF_BLOCKS = 36


def speed(openssl, seconds, *arguments):
    """The machine-readable lines (`+...`) of one `openssl speed -mr` run."""
    command = [openssl, "speed", "-mr", "-seconds", str(seconds), *arguments]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith("+")]
    if result.returncode != 0 or not lines:
        sys.exit(f"{' '.join(command)} failed: {result.stderr.strip()[-400:]}")
    return lines


def field(lines, prefix, index):
    for line in lines:
        if line.startswith(prefix):
            return float(line.split(":")[index])
    sys.exit(f"no {prefix} line in {lines}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=3, help="seconds per openssl speed run (default 3)")
    parser.add_argument("--openssl", default="openssl")
    options = parser.parse_args()

    version = subprocess.run([options.openssl, "version"], capture_output=True, text=True).stdout.strip()
    ecdh_per_second = field(speed(options.openssl, options.seconds, "ecdhp256"), "+F5:", 3)
    sign_per_second = field(speed(options.openssl, options.seconds, "ecdsap256"), "+F4:", 3)
    sha_bytes_per_second = field(speed(options.openssl, options.seconds, "-bytes", "64", "-evp", "sha256"), "+F:", 3)
    gcm = {size: field(speed(options.openssl, options.seconds, "-bytes", str(size), "-evp", "aes-128-gcm"), "+F:", 3)
           for size in SIZES}

    keygen_us = 1e6 / sign_per_second
    ecdh_us = 1e6 / ecdh_per_second
    hkdf_us = HKDF_BLOCKS * 1e6 / (sha_bytes_per_second / 64 * 2)
    print(f"{version}; {options.seconds} s per run, one core")
    print(f"  ephemeral key (ECDSA P-256 sign as proxy) {keygen_us:8.2f} us")
    print(f"  ECDH P-256 derive                         {ecdh_us:8.2f} us")
    print(f"  HKDF-SHA-256 x3 (~{HKDF_BLOCKS} blocks, estimate)      {hkdf_us:8.2f} us")
    for size in SIZES:
        gcm_us = size * 1e6 / gcm[size]
        total = keygen_us + ecdh_us + hkdf_us + gcm_us
        print(f"  AES-128-GCM {size:5d} bytes                  {gcm_us:8.2f} us"
              f"  -> floor {total:7.2f} us/message, {1e6 / total:9.0f} messages/s per core")


if __name__ == "__main__":
    main()
