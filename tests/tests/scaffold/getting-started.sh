# The session of the book's "Getting started" chapter. tests/tests/scaffold.rs
# runs every line of it, in order, against the real control plane.

# ANCHOR: init
cargo concord init demo --domain example.com
cd demo
# ANCHOR_END: init

# ANCHOR: create
cargo concord create api --group ships --version v1 --kind Frigate
# ANCHOR_END: create

# ANCHOR: run
cargo run -- --dev
# ANCHOR_END: run

# ANCHOR: test
cargo test
# ANCHOR_END: test

# ANCHOR: second
cargo concord create api --group ports --version v1alpha1 --kind DockYard --cluster-scoped
cargo test
# ANCHOR_END: second

# ANCHOR: generate
cargo concord generate
cargo concord explain
# ANCHOR_END: generate

# ANCHOR: deploy
docker build -t demo:0.1.0 .
kubectl apply -k deploy/
# ANCHOR_END: deploy
