"""The one compiled module: protocol/_record_columns.c (records sections into Arrow-layout columns for the Spark
data source). Optional: without a C compiler the install goes on and protocol.record_columns uses its pure-Python
builder."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("protocol._record_columns", ["protocol/_record_columns.c"], optional=True)])
