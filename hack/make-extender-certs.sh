#!/usr/bin/env bash
# Make the certificates that let only kube-scheduler (vgpu-scheduler) talk to the vgpu extender:
#   server-ca.crt          CA kube-scheduler trusts for the extender   (tlsConfig.caFile)
#   extender.crt/.key      the extender's serving certificate          (--tls-cert, --tls-key)
#   client-ca.crt          CA the extender trusts for its clients      (--client-ca)
#   scheduler.crt/.key     kube-scheduler's client certificate         (tlsConfig.certFile/keyFile)
# Two CAs, so that neither side's certificate can stand in for the other. The CA keys are
# deleted unless --keep-ca-keys is given (nothing more can be signed with them then).
#
# Every key is ECDSA P-256: kube-scheduler resumes no TLS session with an extender, so it does
# full handshakes often, and a P-256 signature is far cheaper than an RSA one. --rsa makes
# RSA-2048 keys instead, only for a policy that demands RSA (bench/extender_tls_cost.py: cost).
#
# Usage: hack/make-extender-certs.sh OUTDIR [--days N] [--namespace NS] [--keep-ca-keys]
#                                           [--apply] [--rsa]
# --apply also creates the two Secrets (vgpu-extender-tls, vgpu-scheduler-extender-client) in
# the namespace with kubectl. Nothing here is committed: OUTDIR holds private keys (mode 0600).
# Needs openssl >= 1.1.1.
set -euo pipefail

out="" days=365 ns=vgpu-system keep=0 apply=0
newkey=(-newkey ec -pkeyopt ec_paramgen_curve:P-256)
while (($#)); do
  case "$1" in
    --days) days="$2"; shift 2 ;;
    --namespace) ns="$2"; shift 2 ;;
    --keep-ca-keys) keep=1; shift ;;
    --apply) apply=1; shift ;;
    --rsa) newkey=(-newkey rsa:2048); shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    -*) echo "make-extender-certs: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) out="$1"; shift ;;
  esac
done
[[ -n "$out" ]] || { echo "make-extender-certs: give OUTDIR (see --help)" >&2; exit 2; }
mkdir -p "$out"
umask 077
cd "$out"

ca() {  # name, common name
  openssl req -x509 "${newkey[@]}" -nodes -days "$days" \
    -subj "/CN=$2" -keyout "$1.key" -out "$1.crt" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    2>/dev/null
}

leaf() {  # name, CA name, common name, extendedKeyUsage, [subjectAltName]
  local ext="basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=$4"
  [[ -n "${5:-}" ]] && ext="$ext
subjectAltName=$5"
  openssl req "${newkey[@]}" -nodes -subj "/CN=$3" \
    -keyout "$1.key" -out "$1.csr" 2>/dev/null
  openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -CAcreateserial -days "$days" \
    -extfile <(printf '%s\n' "$ext") -out "$1.crt" 2>/dev/null
  rm -f "$1.csr"
}

svc="vgpu-extender.$ns.svc"
ca server-ca "vgpu extender server CA"
ca client-ca "vgpu extender client CA"
leaf extender server-ca "$svc" serverAuth \
  "DNS:$svc,DNS:$svc.cluster.local,DNS:vgpu-extender,DNS:localhost,IP:127.0.0.1"
leaf scheduler client-ca "vgpu-scheduler" clientAuth
rm -f ./*.srl
((keep)) || rm -f server-ca.key client-ca.key
chmod 0600 ./*.key && chmod 0644 ./*.crt
echo "make-extender-certs: wrote $(ls | tr '\n' ' ')in $out"

if ((apply)); then
  kubectl -n "$ns" create secret generic vgpu-extender-tls \
    --from-file=tls.crt=extender.crt --from-file=tls.key=extender.key \
    --from-file=client-ca.crt=client-ca.crt --dry-run=client -o yaml | kubectl apply -f -
  kubectl -n "$ns" create secret generic vgpu-scheduler-extender-client \
    --from-file=tls.crt=scheduler.crt --from-file=tls.key=scheduler.key \
    --from-file=ca.crt=server-ca.crt --dry-run=client -o yaml | kubectl apply -f -
fi
