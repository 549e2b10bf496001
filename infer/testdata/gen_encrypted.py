#!/usr/bin/env python3
"""Encrypts data the way the original Cluster Serving's Python side did.

It mirrors get_private_key, encrypt_bytes_with_AES_GCM and
encrypt_bytes_with_AES_CBC of the original's encryption_utils.py
(intel-analytics/BigDL-2.x: pyzoo/zoo/common/encryption_utils.py, later
python/dllib/src/bigdl/dllib/utils/encryption_utils.py), with Python's
hashlib and python3-cryptography only, independently of the Go code that
decrypts. The one change: the IV may be given (the original draws it from
os.urandom) so that the vectors are reproducible.

  gen_encrypted.py vectors > encrypted.json   the known-answer vectors
  gen_encrypted.py record SECRET SALT < file  base64 of IV||GCM||tag of file
  gen_encrypted.py model SECRET SALT < file   base64 of IV||CBC of file
"""
import base64
import hashlib
import json
import os
import sys

from cryptography.hazmat.backends import default_backend
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes


def get_private_key(secret_key, salt, key_len=128):
    # As the original: UTF-8 strings, PBKDF2-HMAC-SHA256, 65536 iterations.
    return hashlib.pbkdf2_hmac('SHA256', secret_key.encode(), salt.encode(),
                               65536, key_len // 8)


def encrypt_bytes_with_AES_GCM(plain, secret_key, salt, iv=None):
    key = get_private_key(secret_key, salt)
    iv = iv if iv is not None else os.urandom(12)
    enc = Cipher(algorithms.AES(key), modes.GCM(iv),
                 backend=default_backend()).encryptor()
    ct = enc.update(plain) + enc.finalize()
    return iv + ct + enc.tag


def encrypt_bytes_with_AES_CBC(plain, secret_key, salt, iv=None):
    key = get_private_key(secret_key, salt)
    iv = iv if iv is not None else os.urandom(16)
    padder = padding.PKCS7(128).padder()
    data = padder.update(plain) + padder.finalize()
    enc = Cipher(algorithms.AES(key), modes.CBC(iv),
                 backend=default_backend()).encryptor()
    return iv + enc.update(data) + enc.finalize()


def b64(b):
    return base64.b64encode(b).decode()


def vectors():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, 'add_f32.onnx'), 'rb') as f:
        model = f.read()
    secret, salt = 'analytics-zoo', 'intel-analytics'  # the original's test pair
    plain = b'hello world, hello scala, hello encrypt, come on UNITED!!!'
    return {
        'secret': secret,
        'salt': salt,
        'key_hex': get_private_key(secret, salt).hex(),
        'plain': plain.decode(),
        'gcm_b64': b64(encrypt_bytes_with_AES_GCM(plain, secret, salt, bytes(range(12)))),
        'cbc_b64': b64(encrypt_bytes_with_AES_CBC(plain, secret, salt, bytes(range(16)))),
        'model': 'add_f32.onnx',
        'model_cbc_b64': b64(encrypt_bytes_with_AES_CBC(model, secret, salt, bytes(range(16, 32)))),
        'model_gcm_b64': b64(encrypt_bytes_with_AES_GCM(model, secret, salt, bytes(range(32, 44)))),
    }


def main():
    if sys.argv[1:] == ['vectors']:
        json.dump(vectors(), sys.stdout, indent=1)
        sys.stdout.write('\n')
        return
    if len(sys.argv) == 4 and sys.argv[1] in ('record', 'model'):
        plain = sys.stdin.buffer.read()
        fn = encrypt_bytes_with_AES_GCM if sys.argv[1] == 'record' else encrypt_bytes_with_AES_CBC
        sys.stdout.write(b64(fn(plain, sys.argv[2], sys.argv[3])))
        return
    sys.exit(__doc__)


if __name__ == '__main__':
    main()
