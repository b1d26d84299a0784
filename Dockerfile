# labkit cleaning as a container step:
#   docker build -t labkit-clean .
#   docker run --rm -v "$PWD/dump:/data" labkit-clean crawl --out clean --workers 2
# The entry point is `labkit clean`; arguments are its INPUT... --out DIR [options].
#
# Slim on purpose: the cleaning pipeline needs no torch/transformers, and the package's
# full dependency list would add ~1 GB (CPU torch) to every pull.  So the cleaning
# dependencies are installed explicitly (same version ranges as pyproject.toml -- a test
# keeps them in sync) and labkit itself with --no-deps.  Other `labkit` commands are
# unavailable in this image and say so; use the project's environment for them.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /opt/labkit
RUN pip install "numpy>=1.26,<2" "chardet>=5,<8" "charset-normalizer>=3.3,<4" "ftfy>=6.2,<7" "lxml>=5" "opencc>=1.1,<2"

COPY pyproject.toml README.md ./
COPY labkit ./labkit
RUN pip install --no-deps . \
    && useradd --create-home --uid 1000 cleaner

USER cleaner
WORKDIR /data
ENTRYPOINT ["labkit", "clean"]
CMD ["--help"]
