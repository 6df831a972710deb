#!/usr/bin/env bash
# Starts the local test cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler
# and KWOK on loopback ports, registers fake GPU nodes that KWOK runs, and prints exactly one
# line on stdout:
#
#   export KUBECONFIG=<run dir>/kubeconfig
#
# so that `eval "$(platform/testcluster/up.sh)"` points kubectl and Muster at it. Everything
# else goes to stderr. Builds the binaries first when they are not cached (build.sh).
# If the cluster in the run dir is up already, it is reused; a half-dead one is stopped first.
#
# Settings (environment):
#   MUSTER_TESTCLUSTER_DIR       run dir: certificates, kubeconfigs, etcd data, logs, pids
#                                (default /tmp/muster-testcluster)
#   MUSTER_TESTCLUSTER_CACHE     binary cache (default ~/.cache/muster-testcluster)
#   TESTCLUSTER_NODES            fake GPU nodes (default 8)
#   TESTCLUSTER_GPUS_PER_NODE    allocatable nvidia.com/gpu per node (default 8)
#   TESTCLUSTER_RACKS            racks the nodes are spread over, in blocks (default 2)
#   TESTCLUSTER_GPU_PRODUCT      nvidia.com/gpu.product label (default NVIDIA-H100-80GB-HBM3)
#   TESTCLUSTER_NODE_CPU         allocatable cpu per node (default 96)
#   TESTCLUSTER_NODE_MEMORY      allocatable memory per node (default 1536Gi)
#   TESTCLUSTER_RDMA_DEVICES     allocatable rdma/rdma_shared_device_a on the first rack's nodes (default 8);
#                                every node is labelled muster.io/block=block-a (one leaf-switch block)
#   TESTCLUSTER_SHARED_NODES     nodes of each GPU-sharing mode the NVIDIA device plugin offers, beyond the
#                                others (default 1): gpu-shared-ts-NN time-sliced (nvidia.com/gpu.shared, 4 replicas per
#                                GPU, GFD's sharing labels) and gpu-shared-mig-NN partitioned (nvidia.com/mig-1g.10gb, 7 per GPU)
#   TESTCLUSTER_PORT_BASE        loopback ports used: base+43 apiserver, base+79/+80 etcd,
#                                base+57 controller-manager, base+59 scheduler, base+50 kwok
#                                (default 16400)
#   TESTCLUSTER_START_TIMEOUT    seconds to wait for each step (default 180)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

# stdout carries the one export line; everything else goes to stderr.
exec 3>&1 1>&2

NODES=${TESTCLUSTER_NODES:-8}
GPUS_PER_NODE=${TESTCLUSTER_GPUS_PER_NODE:-8}
RACKS=${TESTCLUSTER_RACKS:-2}
GPU_PRODUCT=${TESTCLUSTER_GPU_PRODUCT:-NVIDIA-H100-80GB-HBM3}
NODE_CPU=${TESTCLUSTER_NODE_CPU:-96}
NODE_MEMORY=${TESTCLUSTER_NODE_MEMORY:-1536Gi}
RDMA_DEVICES=${TESTCLUSTER_RDMA_DEVICES:-8}
RDMA_RESOURCE=rdma/rdma_shared_device_a
SHARED_NODES=${TESTCLUSTER_SHARED_NODES:-1}
PORT_BASE=${TESTCLUSTER_PORT_BASE:-16400}
TIMEOUT=${TESTCLUSTER_START_TIMEOUT:-180}

for v in NODES GPUS_PER_NODE RACKS PORT_BASE TIMEOUT; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a whole number, not '${!v}'"
done
((NODES >= 1 && NODES <= 250)) || die "TESTCLUSTER_NODES must be 1..250"
((RACKS >= 1 && RACKS <= 26)) || die "TESTCLUSTER_RACKS must be 1..26"

API_PORT=$((PORT_BASE + 43))
ETCD_PORT=$((PORT_BASE + 79))
ETCD_PEER_PORT=$((PORT_BASE + 80))
KCM_PORT=$((PORT_BASE + 57))
SCHED_PORT=$((PORT_BASE + 59))
KWOK_PORT=$((PORT_BASE + 50))
API_URL=https://127.0.0.1:$API_PORT

# KEP-4671 gang scheduling, alpha in Kubernetes v1.36 (README.md, "Gang scheduling"):
# GenericWorkload serves the Workload and PodGroup objects and the pods' spec.schedulingGroup
# (API server), runs the podgroup-protection controller (controller-manager) and the scheduler's
# pod-group queueing; GangScheduling (needs GenericWorkload) adds the GangScheduling plugin to
# the scheduler's default profile. The same gates on all three, as the components must agree.
FEATURE_GATES=GenericWorkload=true,GangScheduling=true
# Alpha API versions are off by default even with their gate on.
GANG_API=scheduling.k8s.io/v1alpha2
RUNTIME_CONFIG=$GANG_API=true

for tool in openssl curl jq base64; do
  command -v "$tool" >/dev/null || die "$tool is needed (Debian package: $tool, or coreutils)"
done

PKI=$RUN_DIR/pki
LOGS=$RUN_DIR/logs
PIDS=$RUN_DIR/pids
KUBECONFIG_PATH=$RUN_DIR/kubeconfig
# What `eval "$(make testcluster-up)"` sets: the kubeconfig, and where this cluster's nodes say their rack and block
# (Muster's defaults are the well-known topology labels, which these fake nodes do not carry).
print_env() {
  echo "export KUBECONFIG=$KUBECONFIG_PATH" >&3
  echo "export MUSTER_K8S_RACK_LABEL=muster.io/rack MUSTER_K8S_BLOCK_LABEL=muster.io/block" >&3
}
MARKER=$RUN_DIR/.muster-testcluster

# --- helpers -------------------------------------------------------------------------------

api() { # api CURL_ARGS... PATH: a request as the cluster admin
  curl -fsS --max-time 10 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$@"
}

serves_gang_api() { # the API server serves PodGroups (GenericWorkload gate and runtime-config on)
  api "$API_URL/apis/$GANG_API" 2>/dev/null | jq -e '[.resources[].name] | index("podgroups") != null' >/dev/null 2>&1
}

running() { # running NAME: its recorded pid is alive
  local pid
  [[ -f $PIDS/$1.pid ]] || return 1
  pid=$(<"$PIDS/$1.pid")
  kill -0 "$pid" 2>/dev/null
}

port_free() {
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

wait_for() { # wait_for WHAT COMPONENT COMMAND...: retry COMMAND until it succeeds
  local what=$1 component=$2 deadline=$((SECONDS + TIMEOUT))
  shift 2
  until "$@" >/dev/null 2>&1; do
    if [[ -n $component ]] && ! running "$component"; then
      fail "$component exited while waiting for $what"
    fi
    ((SECONDS < deadline)) || fail "timed out after ${TIMEOUT}s waiting for $what"
    sleep 0.5
  done
  log "$what: ok ($((SECONDS - started))s)"
}

fail() { # show the logs, stop what was started, exit non-zero
  local f
  log "error: $*"
  for f in "$LOGS"/*.log; do
    [[ -f $f ]] || continue
    log "--- last lines of $f"
    tail -n 15 "$f" >&2 || true
  done
  if [[ ${TESTCLUSTER_KEEP_ON_FAILURE:-0} == 1 ]]; then
    log "TESTCLUSTER_KEEP_ON_FAILURE=1: leaving $RUN_DIR as it is"
  else
    "$TESTCLUSTER_HOME/down.sh" || true
  fi
  exit 1
}

start() { # start NAME BINARY ARGS...: run in the background, log and pid into the run dir
  local name=$1
  shift
  # setsid: the process outlives this script and the terminal's Ctrl-C; down.sh stops it.
  setsid "$@" >"$LOGS/$name.log" 2>&1 </dev/null 3>&- &
  echo $! >"$PIDS/$name.pid"
  log "started $name (pid $!, log $LOGS/$name.log)"
}

issue_cert() { # issue_cert NAME SUBJECT EXTENDED_KEY_USAGE [SUBJECT_ALT_NAMES]
  local name=$1 subject=$2 eku=$3 sans=${4:-}
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    [[ -n $sans ]] && echo "subjectAltName=$sans"
  } >"$PKI/$name.ext"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$PKI/$name.key" -out "$PKI/$name.csr" -subj "$subject" 2>/dev/null
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
    -CAcreateserial -days 365 -sha256 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

write_kubeconfig() { # write_kubeconfig FILE CERT_NAME USER: client-certificate auth, data embedded
  local file=$1 cert=$2 user=$3
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: muster-testcluster
  cluster:
    server: $API_URL
    certificate-authority-data: $(base64 -w0 <"$PKI/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 <"$PKI/$cert.crt")
    client-key-data: $(base64 -w0 <"$PKI/$cert.key")
contexts:
- name: muster-testcluster
  context:
    cluster: muster-testcluster
    user: $user
current-context: muster-testcluster
EOF
  chmod 600 "$file"
}

# --- an existing cluster -------------------------------------------------------------------

components=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
if [[ -f $MARKER ]]; then
  alive=0
  for c in "${components[@]}"; do running "$c" && alive=$((alive + 1)); done
  if ((alive == ${#components[@]})) && api "$API_URL/readyz" >/dev/null 2>&1; then
    # A cluster started before versions.env or the settings above changed is replaced.
    running_version=$(api "$API_URL/version" | jq -r .gitVersion) || running_version=unknown
    has_shared_nodes() { ((SHARED_NODES == 0)) || api "$API_URL/api/v1/nodes/gpu-shared-ts-00" >/dev/null 2>&1; }
    if [[ $running_version == "$KUBERNETES_VERSION" ]] && serves_gang_api && has_shared_nodes; then
      log "the test cluster in $RUN_DIR is up already"
      print_env
      exit 0
    fi
    log "the test cluster in $RUN_DIR runs Kubernetes $running_version$(serves_gang_api || echo " without $GANG_API"), not $KUBERNETES_VERSION with it: restarting it"
  else
    log "a previous test cluster in $RUN_DIR is not (fully) running: stopping it first"
  fi
  "$TESTCLUSTER_HOME/down.sh"
fi
[[ ! -e $RUN_DIR ]] || [[ -z $(ls -A "$RUN_DIR") ]] ||
  die "$RUN_DIR exists and is not a test cluster's run dir: remove it or set MUSTER_TESTCLUSTER_DIR"

for port in "$API_PORT" "$ETCD_PORT" "$ETCD_PEER_PORT" "$KCM_PORT" "$SCHED_PORT" "$KWOK_PORT"; do
  port_free "$port" || die "port $port on 127.0.0.1 is in use (another cluster? set TESTCLUSTER_PORT_BASE)"
done

# --- binaries ------------------------------------------------------------------------------

"$TESTCLUSTER_HOME/build.sh"

started=$SECONDS
mkdir -p "$PKI" "$LOGS" "$PIDS" "$RUN_DIR/etcd"
chmod 700 "$RUN_DIR" "$RUN_DIR/etcd"
touch "$MARKER"

# --- certificates and keys -----------------------------------------------------------------

log "generating the CA, certificates and service-account keys in $PKI"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 -sha256 \
  -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -subj "/CN=muster-testcluster-ca" \
  -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
issue_cert apiserver "/CN=kube-apiserver" serverAuth \
  "IP:127.0.0.1,DNS:localhost,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
issue_cert admin "/O=system:masters/CN=muster-testcluster-admin" clientAuth
issue_cert kube-controller-manager "/CN=system:kube-controller-manager" clientAuth
issue_cert kube-scheduler "/CN=system:kube-scheduler" clientAuth
issue_cert kwok "/O=system:masters/CN=kwok-controller" clientAuth
issue_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
# The aggregation layer's front proxy (the controllers read its CA; without it they complain).
issue_cert front-proxy-client "/CN=front-proxy-client" clientAuth
# KWOK serves the fake kubelets' API (logs, exec) to the API server.
issue_cert kwok-serving "/CN=kwok-kubelet" serverAuth "IP:127.0.0.1,DNS:localhost"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$PKI/sa.key" 2>/dev/null
openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub"

write_kubeconfig "$KUBECONFIG_PATH" admin muster-testcluster-admin
write_kubeconfig "$RUN_DIR/kube-controller-manager.kubeconfig" kube-controller-manager system:kube-controller-manager
write_kubeconfig "$RUN_DIR/kube-scheduler.kubeconfig" kube-scheduler system:kube-scheduler
write_kubeconfig "$RUN_DIR/kwok.kubeconfig" kwok kwok-controller

# --- etcd ----------------------------------------------------------------------------------

start etcd "$ETCD_BIN/etcd" \
  --name=testcluster \
  --data-dir="$RUN_DIR/etcd" \
  --listen-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster="testcluster=http://127.0.0.1:$ETCD_PEER_PORT" \
  --unsafe-no-fsync \
  --log-level=warn
wait_for "etcd /health" etcd curl -fsS --max-time 5 "http://127.0.0.1:$ETCD_PORT/health"

# --- kube-apiserver ------------------------------------------------------------------------

start kube-apiserver "$KUBE_BIN/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --bind-address=127.0.0.1 \
  --advertise-address=127.0.0.1 \
  --secure-port="$API_PORT" \
  --tls-cert-file="$PKI/apiserver.crt" \
  --tls-private-key-file="$PKI/apiserver.key" \
  --client-ca-file="$PKI/ca.crt" \
  --authorization-mode=Node,RBAC \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$PKI/sa.pub" \
  --service-account-signing-key-file="$PKI/sa.key" \
  --service-cluster-ip-range=10.96.0.0/16 \
  --endpoint-reconciler-type=none \
  --allow-privileged=true \
  --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
  --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
  --kubelet-preferred-address-types=InternalIP \
  --kubelet-certificate-authority="$PKI/ca.crt" \
  --requestheader-client-ca-file="$PKI/ca.crt" \
  --requestheader-allowed-names=front-proxy-client \
  --requestheader-username-headers=X-Remote-User \
  --requestheader-group-headers=X-Remote-Group \
  --requestheader-extra-headers-prefix=X-Remote-Extra- \
  --proxy-client-cert-file="$PKI/front-proxy-client.crt" \
  --proxy-client-key-file="$PKI/front-proxy-client.key" \
  --feature-gates="$FEATURE_GATES" \
  --runtime-config="$RUNTIME_CONFIG" \
  --profiling=false
wait_for "kube-apiserver /readyz" kube-apiserver api "$API_URL/readyz"
wait_for "$GANG_API PodGroups served" kube-apiserver serves_gang_api

# --- kube-controller-manager and kube-scheduler --------------------------------------------

# Only the controllers a cluster without cloud, kubelets or network plugins can use: garbage
# collection of owned objects, service accounts and their tokens, namespaces, node lifecycle
# (taints on NotReady nodes) and pod GC (pods of deleted nodes), endpoints for headless
# Services, the workload controllers, the aggregated ClusterRoles (admin, edit, view), and the binding of
# PersistentVolumeClaims to PersistentVolumes (teams' data volumes; nothing is mounted, KWOK runs no kubelet).
# podgroup-protection-controller: the API server's PodGroupProtection admission plugin (on by
# default) puts a finalizer on every PodGroup; this controller removes it once no pod uses the
# group. Without it a deleted PodGroup, and so its namespace, would never go away.
kcm_controllers=(
  garbage-collector-controller
  serviceaccount-controller
  serviceaccount-token-controller
  root-ca-certificate-publisher-controller
  namespace-controller
  node-lifecycle-controller
  taint-eviction-controller
  pod-garbage-collector-controller
  endpoints-controller
  endpointslice-controller
  endpointslice-mirroring-controller
  replicaset-controller
  deployment-controller
  statefulset-controller
  daemonset-controller
  job-controller
  cronjob-controller
  ttl-after-finished-controller
  resourcequota-controller
  disruption-controller
  clusterrole-aggregation-controller
  service-cidr-controller
  persistentvolume-binder-controller
  podgroup-protection-controller
)
kcm_kubeconfig=$RUN_DIR/kube-controller-manager.kubeconfig
start kube-controller-manager "$KUBE_BIN/kube-controller-manager" \
  --kubeconfig="$kcm_kubeconfig" \
  --authentication-kubeconfig="$kcm_kubeconfig" \
  --authorization-kubeconfig="$kcm_kubeconfig" \
  --bind-address=127.0.0.1 \
  --secure-port="$KCM_PORT" \
  --leader-elect=false \
  --controllers="$(IFS=,; echo "${kcm_controllers[*]}")" \
  --use-service-account-credentials=true \
  --service-account-private-key-file="$PKI/sa.key" \
  --root-ca-file="$PKI/ca.crt" \
  --cluster-name=muster-testcluster \
  --kube-api-qps=100 \
  --kube-api-burst=200 \
  --feature-gates="$FEATURE_GATES" \
  --profiling=false

sched_kubeconfig=$RUN_DIR/kube-scheduler.kubeconfig
start kube-scheduler "$KUBE_BIN/kube-scheduler" \
  --kubeconfig="$sched_kubeconfig" \
  --authentication-kubeconfig="$sched_kubeconfig" \
  --authorization-kubeconfig="$sched_kubeconfig" \
  --bind-address=127.0.0.1 \
  --secure-port="$SCHED_PORT" \
  --leader-elect=false \
  --feature-gates="$FEATURE_GATES" \
  --profiling=false

# --- KWOK ----------------------------------------------------------------------------------

# What `kubectl logs` (the API server asks KWOK, the fake kubelets' server) shows for any
# container: a few fixed lines, in the CRI log format KWOK reads (time, stream, tag, text).
now=$(date -u +%Y-%m-%dT%H:%M:%S.000000000Z)
for line in 1 2 3 4 5; do
  echo "$now stdout F muster-testcluster: simulated container output, line $line"
done >"$RUN_DIR/container.log"
cat >"$RUN_DIR/kwok-logs.yaml" <<EOF
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: muster-testcluster-logs
spec:
  logs:
  - logsFile: $RUN_DIR/container.log
    follow: false
EOF

start kwok "$KWOK_BIN/kwok" \
  --kubeconfig="$RUN_DIR/kwok.kubeconfig" \
  --config="$TESTCLUSTER_HOME/stages/nodes.yaml" \
  --config="$TESTCLUSTER_HOME/stages/pods.yaml" \
  --config="$RUN_DIR/kwok-logs.yaml" \
  --manage-all-nodes=false \
  --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --node-lease-duration-seconds=40 \
  --node-ip=127.0.0.1 \
  --cidr=10.244.0.0/16 \
  --server-address="127.0.0.1:$KWOK_PORT" \
  --node-port="$KWOK_PORT" \
  --tls-cert-file="$PKI/kwok-serving.crt" \
  --tls-private-key-file="$PKI/kwok-serving.key"

wait_for "kube-controller-manager /healthz" kube-controller-manager \
  curl -fsSk --max-time 5 "https://127.0.0.1:$KCM_PORT/healthz"
wait_for "kube-scheduler /healthz" kube-scheduler \
  curl -fsSk --max-time 5 "https://127.0.0.1:$SCHED_PORT/healthz"
wait_for "the default service account" kube-controller-manager \
  api "$API_URL/api/v1/namespaces/default/serviceaccounts/default"

# --- fake GPU nodes ------------------------------------------------------------------------

log "registering $NODES fake GPU nodes x $GPUS_PER_NODE nvidia.com/gpu in $RACKS racks"
letters=abcdefghijklmnopqrstuvwxyz
per_rack=$(((NODES + RACKS - 1) / RACKS))
for ((i = 0; i < NODES; i++)); do
  name=$(printf 'gpu-node-%02d' "$i")
  rack="rack-${letters:$((i / per_rack)):1}"
  rdma=0
  ((i < per_rack)) && rdma=$RDMA_DEVICES
  resources=$(jq -cn --arg cpu "$NODE_CPU" --arg mem "$NODE_MEMORY" --arg gpu "$GPUS_PER_NODE" \
    --arg rdma_name "$RDMA_RESOURCE" --arg rdma "$rdma" \
    '{cpu: $cpu, memory: $mem, pods: "110", "ephemeral-storage": "1Ti", "nvidia.com/gpu": $gpu}
     + (if $rdma == "0" then {} else {($rdma_name): $rdma} end)')
  node=$(jq -cn --arg name "$name" --arg rack "$rack" --arg product "$GPU_PRODUCT" \
    --arg gpus "$GPUS_PER_NODE" --arg cidr "10.244.$i.0/24" --argjson res "$resources" '{
    apiVersion: "v1", kind: "Node",
    metadata: {
      name: $name,
      annotations: {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
      labels: {
        "kubernetes.io/hostname": $name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "type": "kwok", "muster.io/rack": $rack, "muster.io/block": "block-a",
        "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": $product,
        "nvidia.com/gpu.count": $gpus, "nvidia.com/gpu.memory": "81559"
      }
    },
    spec: {podCIDR: $cidr, podCIDRs: [$cidr]},
    status: {
      allocatable: $res, capacity: $res,
      addresses: [{type: "InternalIP", address: "127.0.0.1"}, {type: "Hostname", address: $name}]
    }
  }')
  api -X POST -H 'Content-Type: application/json' --data "$node" "$API_URL/api/v1/nodes" >/dev/null ||
    fail "could not create node $name"
done

# Nodes whose GPUs the device plugin shares, as it and GPU feature discovery advertise them (docs/gpu-sharing.md).
shared_node() { # name, extended resources (JSON), extra labels (JSON)
  local res
  res=$(jq -cn --arg cpu "$NODE_CPU" --arg mem "$NODE_MEMORY" --argjson gpu "$2" \
    '{cpu: $cpu, memory: $mem, pods: "110", "ephemeral-storage": "1Ti"} + $gpu')
  jq -cn --arg name "$1" --arg rack "rack-shared" --arg product "$GPU_PRODUCT" --arg gpus "$GPUS_PER_NODE" \
    --argjson res "$res" --argjson extra "$3" '{
    apiVersion: "v1", kind: "Node",
    metadata: {
      name: $name,
      annotations: {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
      labels: ({
        "kubernetes.io/hostname": $name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "type": "kwok", "muster.io/rack": $rack, "muster.io/block": "block-a",
        "nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": $gpus, "nvidia.com/gpu.memory": "81559"
      } + $extra)
    },
    status: {
      allocatable: $res, capacity: $res,
      addresses: [{type: "InternalIP", address: "127.0.0.1"}, {type: "Hostname", address: $name}]
    }
  }'
}
if ((SHARED_NODES > 0)); then
  log "registering $SHARED_NODES time-sliced and $SHARED_NODES MIG node(s)"
fi
for ((i = 0; i < SHARED_NODES; i++)); do
  for node in \
    "$(shared_node "$(printf 'gpu-shared-ts-%02d' "$i")" "{\"nvidia.com/gpu.shared\": \"$((GPUS_PER_NODE * 4))\"}" \
      "{\"nvidia.com/gpu.sharing-strategy\": \"time-slicing\", \"nvidia.com/gpu.replicas\": \"4\", \"nvidia.com/gpu.product\": \"$GPU_PRODUCT-SHARED\"}")" \
    "$(shared_node "$(printf 'gpu-shared-mig-%02d' "$i")" "{\"nvidia.com/mig-1g.10gb\": \"$((GPUS_PER_NODE * 7))\"}" \
      "{\"nvidia.com/mig.strategy\": \"mixed\", \"nvidia.com/gpu.product\": \"$GPU_PRODUCT\"}")"; do
    api -X POST -H 'Content-Type: application/json' --data "$node" "$API_URL/api/v1/nodes" >/dev/null ||
      fail "could not create a shared GPU node"
  done
done

nodes_ready() { # every fake node is Ready, untainted and shows its GPUs
  api "$API_URL/api/v1/nodes" | jq -e --argjson n "$NODES" --arg gpus "$GPUS_PER_NODE" '
    [.items[] | select(.metadata.annotations["kwok.x-k8s.io/node"] == "fake")
      | select(any(.status.conditions[]?; .type == "Ready" and .status == "True"))
      | select((.spec.taints // []) | length == 0)
      | select(.status.allocatable["nvidia.com/gpu"] == $gpus)] | length == $n' &&
    api "$API_URL/api/v1/nodes" | jq -e --argjson n "$((SHARED_NODES * 2))" '
    [.items[] | select(.metadata.name | test("^gpu-shared-"))
      | select(any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length == $n'
}
wait_for "$NODES GPU nodes and $((SHARED_NODES * 2)) shared ones Ready" kwok nodes_ready

cat >"$RUN_DIR/cluster.env" <<EOF
KUBECONFIG=$KUBECONFIG_PATH
TESTCLUSTER_API_URL=$API_URL
TESTCLUSTER_NODES=$NODES
TESTCLUSTER_GPUS_PER_NODE=$GPUS_PER_NODE
TESTCLUSTER_RACKS=$RACKS
TESTCLUSTER_RACK_LABEL=muster.io/rack
TESTCLUSTER_BLOCK_LABEL=muster.io/block
TESTCLUSTER_RDMA_RESOURCE=$RDMA_RESOURCE
TESTCLUSTER_RDMA_DEVICES=$RDMA_DEVICES
TESTCLUSTER_GPU_PRODUCT=$GPU_PRODUCT
TESTCLUSTER_SHARED_NODES=$SHARED_NODES
EOF
log "up in $((SECONDS - started))s: Kubernetes $KUBERNETES_VERSION at $API_URL, $NODES nodes; logs in $LOGS"
print_env
