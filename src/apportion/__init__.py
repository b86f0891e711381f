"""apportion: share a pool of hosts among many tenants, the EGO and DUCC way."""
__version__ = "0.1.0"
