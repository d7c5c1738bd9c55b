"""The compiled modules, both optional (without a C compiler, or without OpenSSL's headers for the second, the
install goes on and the pure-Python path runs):

* protocol/_record_columns.c: records sections into Arrow-layout columns for the Spark data source
  (protocol.record_columns falls back to its pure-Python builder);
* broker/network/_tls_records.c: TLS records decrypted without the GIL, so client connections' TLS runs on network
  threads beside the event loop (broker/network/tls_offload.py; without it uvloop's TLS transport does it on the
  loop)."""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("protocol._record_columns", ["protocol/_record_columns.c"], optional=True),
    Extension("broker.network._tls_records", ["broker/network/_tls_records.c"], libraries=["ssl", "crypto"],
              optional=True),
])
