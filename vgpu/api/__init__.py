"""Wire contracts: generated kubelet gRPC code (_proto) and pure (de)serialisation."""
