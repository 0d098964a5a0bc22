"""The gateways as one fleet in ZooKeeper: each registers an ephemeral znode carrying its quota
sensors' rates and reads the others', so a tenant's quotas hold across gateways
(docs/gateway.md, "Quotas across gateways"). `codec`: the znode's format; `peers`: the shares
enforced from the peers' rates; `exchange`: the kazoo side. Optional: without
`zookeeper.connect` a gateway enforces its quotas alone, as Kafka does per broker.
"""
