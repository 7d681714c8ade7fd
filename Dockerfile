# SymLab for a shared server (classroom caps on: SYMLAB_HOSTED=1): symlab serve, a page process per core behind HAProxy.
#   docker build -t symlab .
#   docker run -p 8501:8501 -v symlab-runs:/data/runs symlab
# CUDA hosts: install torch's CUDA build instead of the CPU one (~5 GB larger), and give it the GPU:
#   docker build --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128 -t symlab:cuda .
#   docker run --gpus all -p 8501:8501 -v symlab-runs:/data/runs symlab:cuda
FROM python:3.11-slim

# Where torch comes from: PyTorch's CPU wheels by default (PyPI's Linux wheel is the CUDA build,
# gigabytes of it); empty: the default package index.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    SYMLAB_HOSTED=1 SYMLAB_RUNS_DIR=/data/runs
WORKDIR /app

# The proxy in front of the page processes (symlab serve): Debian's HAProxy.
RUN apt-get update && apt-get install -y --no-install-recommends haproxy && rm -rf /var/lib/apt/lists/*

# What serving needs and nothing else: the package's runtime dependencies (pyproject.toml), not its cluster or test
# extras. torch first, from TORCH_INDEX_URL, at the version pyproject.toml pins.
COPY pyproject.toml README.md ./
COPY symlab symlab
RUN pip install ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} "$(grep -o '"torch==[0-9.]*"' pyproject.toml | tr -d '"')" && pip install .
COPY . .
# MNIST runs (registry, checkpoints, logs) outlive the container in this volume.
RUN useradd --create-home symlab && mkdir -p /data/runs && chown symlab /data/runs
VOLUME /data/runs
USER symlab

EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=90s --retries=3 CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4)"
# Run from /app, where serve.py is: the proxy on 8501, a page process per core of the container behind it.
CMD ["python", "-m", "symlab", "serve", "--port=8501", "--address=0.0.0.0"]
