#!/usr/bin/env bash
# The commands of the book's "Getting started" chapter, as one script: run
# it with `bash getting-started.sh` from the directory that should hold
# the new project, or type its lines one by one.
# tests/tests/scaffold/project.rs runs this very file, from a directory outside
# the checkout with an empty HOME, with the names below set to its own.
set -euo pipefail

# ANCHOR: names
# The names of this session; the defaults are the book's.
CONCORD=${CONCORD:-concord}           # where the concord repository is cloned
OPERATOR=${OPERATOR:-demo}            # the project: a crate, its namespace, its Lease
DOMAIN=${DOMAIN:-example.com}         # the domain of its API groups
GROUP=${GROUP:-ships}                 # a namespaced kind ...
VERSION=${VERSION:-v1}
KIND=${KIND:-Frigate}
SECOND_GROUP=${SECOND_GROUP:-ports}   # ... and a cluster-scoped one
SECOND_VERSION=${SECOND_VERSION:-v1alpha1}
SECOND_KIND=${SECOND_KIND:-DockYard}
# ANCHOR_END: names

# ANCHOR: install
[ -d "$CONCORD" ] || git clone https://github.com/concord-rs/concord "$CONCORD"
cargo install --locked --debug --path "$CONCORD/framework/cargo-concord"
# ANCHOR_END: install

# ANCHOR: init
cargo concord init "$OPERATOR" --domain "$DOMAIN"
cd "$OPERATOR"
# ANCHOR_END: init

# ANCHOR: create
cargo concord create api --group "$GROUP" --version "$VERSION" --kind "$KIND"
# ANCHOR_END: create

# ANCHOR: second
cargo concord create api --group "$SECOND_GROUP" --version "$SECOND_VERSION" \
  --kind "$SECOND_KIND" --cluster-scoped
# ANCHOR_END: second

# ANCHOR: seed
# A sample of another kind: an object the operator's kinds may read.
cat > config/samples/settings.yaml <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata:
  name: fleet-settings
data:
  harbour: north & <ü>
YAML
# ANCHOR_END: seed

# ANCHOR: run
cargo run -- --dev    # stop it with Ctrl-C once the samples are Ready
# ANCHOR_END: run

# ANCHOR: test
cargo test
# ANCHOR_END: test

# ANCHOR: generate
cargo concord generate
cargo concord generate    # again: nothing to change
cargo concord explain
# ANCHOR_END: generate
