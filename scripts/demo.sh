#!/usr/bin/env bash
# The main job end to end on the built-in sandbox: start it, seed examples/fleet.yaml, plan,
# apply, show the pools, plan again (no changes), verify the nodes, sync the catalog and show its
# capacity, place a 4 GiB request, place a pod on a pool at zero and watch it scale up; then DRA
# (examples/dra.yaml in a second sandbox): apply, install the DRA driver with the values `render`
# gives, verify the ResourceSlices, place a pod on a MIG device through a claim and see it run;
# serve the catalog over HTTP for a few seconds (fetching /api/capacity), stop.
set -euo pipefail

provisioner=".venv/bin/provisioner"
fleet="examples/fleet.yaml"
sandbox="$(mktemp -d)"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

step provisioner validate "$fleet"
"$provisioner" validate "$fleet"

step provisioner sandbox serve --dir "$sandbox" --seed "$fleet" --op-seconds 1 --latency-ms 20 '&'
"$provisioner" sandbox serve --dir "$sandbox" --seed "$fleet" --op-seconds 1 --latency-ms 20 &
server=$!
stop() { kill -TERM "$server" 2>/dev/null && wait "$server" || true; rm -rf "$sandbox"; }
trap stop EXIT
for _ in $(seq 100); do [ -f "$sandbox/endpoints.json" ] && break; sleep 0.1; done
[ -f "$sandbox/endpoints.json" ] || { echo "the sandbox did not start" >&2; exit 1; }
export PROVISIONER_SANDBOX="$sandbox"

step provisioner render "$fleet" --out-dir "$sandbox/k8s"
"$provisioner" render "$fleet" --out-dir "$sandbox/k8s"

step provisioner plan "$fleet"
"$provisioner" plan "$fleet"

step provisioner apply "$fleet" --auto-approve
"$provisioner" apply "$fleet" --auto-approve

step provisioner pools "$fleet"
"$provisioner" pools "$fleet"

step provisioner plan "$fleet" --detailed-exitcode
"$provisioner" plan "$fleet" --detailed-exitcode

step provisioner verify "$fleet"
"$provisioner" verify "$fleet"

step kubectl --kubeconfig "$sandbox/kubeconfig" --context gcp-ml get nodes -L nvidia.com/gpu.product
if command -v kubectl >/dev/null; then  # the users' own tools work against the sandbox too
  kubectl --kubeconfig "$sandbox/kubeconfig" --context gcp-ml get nodes -L nvidia.com/gpu.product
else
  echo "(kubectl is not installed: skipped)"
fi

step provisioner sync "$fleet"
"$provisioner" sync "$fleet"

step provisioner catalog inspect
"$provisioner" catalog inspect

step provisioner place --gpu-memory 4GiB --cloud ack
"$provisioner" place --gpu-memory 4GiB --cloud ack

# A pool at zero nodes starts for a placed pod: the autoscaler reads the hints apply wrote.
manifest="examples/manifests/notebook.yaml"
# (--pool: left to choose, place prefers p4d-mig, whose node runs with free slices now.)
step provisioner place --gpu-memory 2GB --pool a10g-timesliced --manifest "$manifest" '>' "$sandbox/notebook.yaml"
"$provisioner" place --gpu-memory 2GB --pool a10g-timesliced --manifest "$manifest" > "$sandbox/notebook.yaml"
cat "$sandbox/notebook.yaml"
if command -v kubectl >/dev/null; then
  kube=(kubectl --kubeconfig "$sandbox/kubeconfig" --context aws-ml)
  step kubectl apply -f "$sandbox/notebook.yaml"
  "${kube[@]}" apply -f "$sandbox/notebook.yaml"
  "${kube[@]}" get pod notebook
  running=""
  for _ in $(seq 100); do  # Pending until the autoscaler's node joins (--op-seconds)
    "${kube[@]}" get pod notebook --no-headers | grep -q Running && { running=yes; break; }
    sleep 0.2
  done
  [ -n "$running" ] || { "${kube[@]}" get events >&2; echo "the pod never ran: no node was added" >&2; exit 1; }
  events="$("${kube[@]}" get events)"  # read whole: grep -q ending a pipe early would fail it (pipefail)
  grep -q TriggeredScaleUp <<<"$events" || { echo "the pod ran without a scale-up" >&2; exit 1; }
  step kubectl get pod notebook '&&' kubectl get nodes -L eks.amazonaws.com/nodegroup '&&' kubectl get events
  "${kube[@]}" get pod notebook
  "${kube[@]}" get nodes -L eks.amazonaws.com/nodegroup
  "${kube[@]}" get events
else
  echo "(kubectl is not installed: skipped)"
fi

# DRA pools: the device plugin off on their nodes, NVIDIA's DRA driver installed with the values
# `render` gives (the sandbox installs it as helm would), devices claimed by a placed pod.
dra_fleet="examples/dra.yaml"
dra_sandbox="$(mktemp -d)"
step provisioner sandbox serve --dir "$dra_sandbox" --seed "$dra_fleet" --op-seconds 0.2 '&'
"$provisioner" sandbox serve --dir "$dra_sandbox" --seed "$dra_fleet" --op-seconds 0.2 > /dev/null &
dra_server=$!
stop_dra() { kill -TERM "$dra_server" 2>/dev/null && wait "$dra_server" || true; rm -rf "$dra_sandbox"; }
trap 'stop_dra; stop' EXIT
for _ in $(seq 100); do [ -f "$dra_sandbox/endpoints.json" ] && break; sleep 0.1; done
[ -f "$dra_sandbox/endpoints.json" ] || { echo "the DRA sandbox did not start" >&2; exit 1; }
dra=(env PROVISIONER_SANDBOX="$dra_sandbox" "$provisioner")

step provisioner apply "$dra_fleet" --auto-approve
"${dra[@]}" apply "$dra_fleet" --auto-approve
step provisioner render "$dra_fleet" --out-dir "$dra_sandbox/k8s"
"${dra[@]}" render "$dra_fleet" --out-dir "$dra_sandbox/k8s"
cat "$dra_sandbox/k8s/aws-dra/dra-driver-values.yaml"
for cluster in azure-dra gcp-dra aws-dra ali-dra; do
  step provisioner sandbox install-dra-driver --cluster "$cluster" -f "k8s/$cluster/dra-driver-values.yaml"
  "${dra[@]}" sandbox install-dra-driver --dir "$dra_sandbox" --cluster "$cluster" \
    -f "$dra_sandbox/k8s/$cluster/dra-driver-values.yaml" | head -3
done
step provisioner verify "$dra_fleet"
"${dra[@]}" verify "$dra_fleet"
step provisioner sync "$dra_fleet"
"${dra[@]}" sync "$dra_fleet"
step provisioner place --mig 2g.20gb --pool p4de-dra --manifest "$manifest"
"${dra[@]}" place --mig 2g.20gb --pool p4de-dra --manifest "$manifest" > "$dra_sandbox/dra-notebook.yaml"
cat "$dra_sandbox/dra-notebook.yaml"
if command -v kubectl >/dev/null; then
  kube=(kubectl --kubeconfig "$dra_sandbox/kubeconfig" --context aws-dra)
  step kubectl apply -f dra-notebook.yaml
  "${kube[@]}" apply -f "$dra_sandbox/dra-notebook.yaml"
  running=""
  for _ in $(seq 100); do
    "${kube[@]}" get pod notebook --no-headers | grep -q Running && { running=yes; break; }
    sleep 0.1
  done
  [ -n "$running" ] || { "${kube[@]}" get events >&2; echo "the DRA pod never ran" >&2; exit 1; }
  step kubectl get pod notebook '&&' kubectl get resourceclaims '&&' kubectl get resourceslices
  "${kube[@]}" get pod notebook -o wide
  "${kube[@]}" get resourceclaims
  "${kube[@]}" get resourceslices
else
  echo "(kubectl is not installed: skipped)"
fi
stop_dra
trap stop EXIT

step provisioner catalog serve --port 0 '&'
"$provisioner" catalog serve --port 0 > "$sandbox/serve.log" 2>&1 &
service=$!
stop_service() { kill -TERM "$service" 2>/dev/null && wait "$service" || true; }
trap 'stop_service; stop' EXIT
address=""
for _ in $(seq 100); do
  address="$(sed -n 's/^Serving the catalog .* at \(http:[^ ]*\) .*/\1/p' "$sandbox/serve.log")"
  [ -n "$address" ] && break
  sleep 0.1
done
[ -n "$address" ] || { cat "$sandbox/serve.log" >&2; echo "catalog serve did not start" >&2; exit 1; }
step GET "${address}api/capacity"
.venv/bin/python -c 'import json, sys, urllib.request; print(json.dumps(json.load(urllib.request.urlopen(sys.argv[1]))[:2], indent=2))' "${address}api/capacity"
echo "(the first 2 rows) The capacity page is at $address; it stops in 5 seconds with the demo."
sleep 5
