#!/usr/bin/env bash
# Checks that a running test cluster behaves as Muster's Kubernetes tests expect, with kubectl:
# nodes, scheduling onto a pinned node, the simulated run (Succeeded, Failed with an exit code,
# DeadlineExceeded), garbage collection of owned objects, default service accounts, deletion,
# pod logs, native gang scheduling (a scheduling.k8s.io/v1alpha2 PodGroup binds its pods all or
# nothing). Exits non-zero on the first check that fails. Needs kubectl and jq.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

[[ -f $RUN_DIR/cluster.env ]] || die "no test cluster in $RUN_DIR: run up.sh (make testcluster-up) first"
# shellcheck disable=SC1091
. "$RUN_DIR/cluster.env"
export KUBECONFIG
command -v kubectl >/dev/null || die "kubectl is needed"

ns=testcluster-smoke-$$
checks=0
ok() { checks=$((checks + 1)); log "ok: $*"; }
k() { kubectl "$@"; }
cleanup() { k delete namespace "$ns" --wait=false >/dev/null 2>&1 || true; }
trap cleanup EXIT

until_true() { # until_true SECONDS DESCRIPTION COMMAND...
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "timed out waiting for: $what"
    sleep 0.5
  done
}

pod_json() { k -n "$ns" get pod "$1" -o json; }
pod_is() { pod_json "$1" | jq -e "$2"; }

# 1. Nodes.
ready=$(k get nodes -o json | jq --arg gpus "$TESTCLUSTER_GPUS_PER_NODE" '[.items[]
  | select(any(.status.conditions[]; .type == "Ready" and .status == "True"))
  | select(.status.allocatable["nvidia.com/gpu"] == $gpus)] | length')
[[ $ready == "$TESTCLUSTER_NODES" ]] || die "$ready of $TESTCLUSTER_NODES nodes Ready with $TESTCLUSTER_GPUS_PER_NODE GPUs"
ok "$ready nodes Ready, nvidia.com/gpu $TESTCLUSTER_GPUS_PER_NODE each"

# 2. A new namespace gets its default service account (serviceaccount controller).
k create namespace "$ns" >/dev/null
until_true 30 "the default service account in $ns" k -n "$ns" get serviceaccount default
ok "namespace $ns got its default ServiceAccount"

# 3. Two pods pinned to two nodes, all their GPUs each: bound there by kube-scheduler, Running,
# then Succeeded (exit 0) and Failed (exit 3) after the simulated 5s.
pinned_pod() { # pinned_pod NAME NODE EXIT_CODE
  cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
  annotations: {muster.io/sim-duration: 5s, muster.io/sim-exit-code: "$3"}
spec:
  restartPolicy: Never
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [$2]}]
  containers:
  - name: main
    image: registry.invalid/train:latest
    resources:
      requests: {nvidia.com/gpu: "$TESTCLUSTER_GPUS_PER_NODE", cpu: "1", memory: 1Gi}
      limits: {nvidia.com/gpu: "$TESTCLUSTER_GPUS_PER_NODE"}
EOF
}
mapfile -t nodes < <(k get nodes -o name | sed 's|node/||' | sort)
first=${nodes[0]}
last=${nodes[${#nodes[@]} - 1]}
{ pinned_pod rank-0 "$first" 0; echo ---; pinned_pod rank-1 "$last" 3; } | k -n "$ns" apply -f - >/dev/null
until_true 30 "rank-0 and rank-1 Running" \
  bash -c "kubectl -n $ns get pods rank-0 rank-1 -o json | jq -e '[.items[].status.phase] == [\"Running\", \"Running\"]'"
[[ $(pod_json rank-0 | jq -r .spec.nodeName) == "$first" && $(pod_json rank-1 | jq -r .spec.nodeName) == "$last" ]] ||
  die "the pods were not bound to $first and $last"
k -n "$ns" get events -o json | jq -e '[.items[] | select(.reason == "Scheduled"
  and .reportingComponent == "default-scheduler")] | length == 2' >/dev/null ||
  die "no Scheduled events from kube-scheduler"
ok "kube-scheduler bound rank-0 to $first and rank-1 to $last; both Running"
until_true 30 "rank-0 Succeeded" pod_is rank-0 '.status.phase == "Succeeded"'
until_true 30 "rank-1 Failed" pod_is rank-1 '.status.phase == "Failed"'
pod_is rank-0 '.status.containerStatuses[0].state.terminated.exitCode == 0' >/dev/null || die "rank-0 exit code"
pod_is rank-1 '.status.containerStatuses[0].state.terminated.exitCode == 3' >/dev/null || die "rank-1 exit code"
ran=$(pod_json rank-0 | jq '(.status.containerStatuses[0].state.terminated.finishedAt | fromdate)
  - (.status.startTime | fromdate) | floor')
ok "rank-0 Succeeded (exit 0) and rank-1 Failed (exit 3) after ${ran}s"

# 4. activeDeadlineSeconds: Failed, DeadlineExceeded.
k -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: deadline, annotations: {muster.io/sim-duration: 1h}}
spec:
  activeDeadlineSeconds: 3
  containers: [{name: main, image: registry.invalid/train:latest}]
EOF
until_true 30 "the deadline pod Failed" pod_is deadline '.status.phase == "Failed"'
pod_is deadline '.status.reason == "DeadlineExceeded"' >/dev/null || die "deadline pod reason"
ok "a pod past activeDeadlineSeconds Failed with reason DeadlineExceeded"

# 5. Garbage collection: a pod owned by a ConfigMap goes when the ConfigMap is deleted.
k -n "$ns" create configmap owner >/dev/null
uid=$(k -n "$ns" get configmap owner -o jsonpath='{.metadata.uid}')
k -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: owned
  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: owner, uid: $uid}]
spec:
  containers: [{name: main, image: registry.invalid/train:latest}]
EOF
until_true 30 "the owned pod Running" pod_is owned '.status.phase == "Running"'
k -n "$ns" delete configmap owner >/dev/null
until_true 60 "the owned pod garbage-collected" bash -c "! kubectl -n $ns get pod owned"
ok "deleting the owner garbage-collected the owned pod"

# 6. Logs through the API server (KWOK serves them).
k -n "$ns" logs rank-0 --tail=1 | grep -q 'simulated container output' || die "no pod logs"
ok "pod logs are served through the API server"

# 7. Deleting a running pod with a finalizer and a grace period: it goes away.
k -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: forever, finalizers: [muster.io/smoke]}
spec:
  terminationGracePeriodSeconds: 30
  containers: [{name: main, image: registry.invalid/train:latest}]
EOF
until_true 30 "the forever pod Running" pod_is forever '.status.phase == "Running"'
k -n "$ns" delete pod forever --wait=false >/dev/null
until_true 30 "the deleted pod gone" bash -c "! kubectl -n $ns get pod forever"
ok "a deleted running pod (finalizer, 30s grace) is gone"

# 8. Native gang scheduling (KEP-4671; the GenericWorkload and GangScheduling gates of up.sh): a
# PodGroup with gang minCount 2 holds its first pod unbound until the second exists, then both
# are bound. Deleting them releases the PodGroup's protection finalizer (controller-manager).
# Fully qualified: tests install a CRD podgroups.scheduling.x-k8s.io too.
podgroups=podgroups.v1alpha2.scheduling.k8s.io
gang_pod() { # gang_pod NAME
  cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  schedulingGroup: {podGroupName: gang}
  containers:
  - name: main
    image: registry.invalid/train:latest
    resources: {requests: {nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "1"}}
EOF
}
k -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata: {name: gang}
spec:
  schedulingPolicy: {gang: {minCount: 2}}
EOF
gang_pod gang-0 | k -n "$ns" apply -f - >/dev/null
sleep 3
pod_is gang-0 '.spec.nodeName == null and .status.phase == "Pending"' >/dev/null ||
  die "gang-0 was bound without the rest of its gang (minCount 2)"
gang_pod gang-1 | k -n "$ns" apply -f - >/dev/null
until_true 30 "gang-0 and gang-1 Running" \
  bash -c "kubectl -n $ns get pods gang-0 gang-1 -o json | jq -e '[.items[] | select(.spec.nodeName != null) | .status.phase] == [\"Running\", \"Running\"]'"
ok "a PodGroup (gang minCount 2) kept its first pod Pending until the second came, then both were bound"
k -n "$ns" delete pod gang-0 gang-1 --wait=false >/dev/null
k -n "$ns" delete "$podgroups" gang --wait=false >/dev/null
until_true 30 "the PodGroup gone" bash -c "! kubectl -n $ns get $podgroups gang"
ok "the deleted PodGroup is gone once its pods are (protection finalizer released)"

log "smoke: all $checks checks ok"
