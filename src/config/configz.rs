//! The running configuration as kubelet's `/configz` serves it:
//! `{"kubeletconfig": {...}}`, each file field picolet implements under
//! its KubeletConfiguration key, with the value in effect (defaults, board
//! profile, file and flags applied), written as the file would write it
//! (durations as Go durations, sizes as quantities); empty values are
//! left out, as kubelet's `omitempty` fields are. Flag-only settings are
//! not KubeletConfiguration fields and are left out too.
//!
//! Pure: [`KubeletConfig::configz`] reads nothing but the struct.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Taint;
use serde_json::{Map, Value};

use super::duration;
use super::fields::{
    AuthorizationMode, CgroupDriver, EnforceNodeAllocatable, EvictionThreshold, KubeletConfig,
    ReservedResources, SwapBehavior, FIELDS,
};

/// A setting's value as a KubeletConfiguration file writes it; `Null`
/// leaves the field out.
pub(super) trait ConfigValue {
    fn config_value(&self) -> Value;
}

macro_rules! plain {
    ($($t:ty),*) => {$(
        impl ConfigValue for $t {
            fn config_value(&self) -> Value {
                Value::from(*self)
            }
        }
    )*};
}
plain!(bool, u8, u16, u32, i32, i64);

/// The one `u64` setting is `containerLogMaxSize`, a quantity.
impl ConfigValue for u64 {
    fn config_value(&self) -> Value {
        Value::from(crate::quantity::format_binary(*self))
    }
}

impl ConfigValue for String {
    fn config_value(&self) -> Value {
        Value::from(self.as_str())
    }
}

impl ConfigValue for PathBuf {
    fn config_value(&self) -> Value {
        Value::from(self.display().to_string())
    }
}

impl<T: ConfigValue> ConfigValue for Option<T> {
    fn config_value(&self) -> Value {
        self.as_ref().map_or(Value::Null, T::config_value)
    }
}

impl ConfigValue for Duration {
    fn config_value(&self) -> Value {
        Value::from(duration::format(*self))
    }
}

impl ConfigValue for IpAddr {
    fn config_value(&self) -> Value {
        Value::from(self.to_string())
    }
}

impl<T: ConfigValue> ConfigValue for Vec<T> {
    fn config_value(&self) -> Value {
        Value::Array(self.iter().map(T::config_value).collect())
    }
}

impl<T: ConfigValue> ConfigValue for BTreeMap<String, T> {
    fn config_value(&self) -> Value {
        Value::Object(
            self.iter()
                .map(|(k, v)| (k.clone(), v.config_value()))
                .collect(),
        )
    }
}

impl ConfigValue for EvictionThreshold {
    fn config_value(&self) -> Value {
        match self {
            EvictionThreshold::Quantity(q) => Value::from(crate::quantity::format_binary(*q)),
            EvictionThreshold::Percentage(p) => Value::from(format!("{p}%")),
        }
    }
}

impl ConfigValue for ReservedResources {
    fn config_value(&self) -> Value {
        let mut m = Map::new();
        if let Some(c) = self.cpu_millis {
            let cpu = if c % 1000 == 0 {
                (c / 1000).to_string()
            } else {
                format!("{c}m")
            };
            m.insert("cpu".into(), Value::from(cpu));
        }
        for (key, amount) in [
            ("memory", self.memory_bytes),
            ("ephemeral-storage", self.ephemeral_storage_bytes),
        ] {
            if let Some(b) = amount {
                m.insert(key.into(), Value::from(crate::quantity::format_binary(b)));
            }
        }
        if let Some(p) = self.pids {
            m.insert("pid".into(), Value::from(p.to_string()));
        }
        if m.is_empty() {
            Value::Null
        } else {
            Value::Object(m)
        }
    }
}

impl ConfigValue for EnforceNodeAllocatable {
    fn config_value(&self) -> Value {
        let keys = [
            (self.pods, "pods"),
            (self.system_reserved, "system-reserved"),
            (self.kube_reserved, "kube-reserved"),
        ];
        Value::Array(
            keys.iter()
                .filter(|(on, _)| *on)
                .map(|(_, k)| Value::from(*k))
                .collect(),
        )
    }
}

impl ConfigValue for AuthorizationMode {
    fn config_value(&self) -> Value {
        Value::from(match self {
            AuthorizationMode::Webhook => "Webhook",
            AuthorizationMode::AlwaysAllow => "AlwaysAllow",
        })
    }
}

impl ConfigValue for CgroupDriver {
    fn config_value(&self) -> Value {
        Value::from(match self {
            CgroupDriver::Cgroupfs => "cgroupfs",
        })
    }
}

impl ConfigValue for SwapBehavior {
    fn config_value(&self) -> Value {
        Value::from(match self {
            SwapBehavior::NoSwap => "NoSwap",
            SwapBehavior::LimitedSwap => "LimitedSwap",
        })
    }
}

impl ConfigValue for Taint {
    fn config_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl KubeletConfig {
    /// kubelet's `/configz` answer: `{"kubeletconfig": {...}}`, nested
    /// keys (`authentication.webhook.enabled`) as nested objects.
    pub fn configz(&self) -> Value {
        let mut root = Map::new();
        for f in FIELDS.iter().filter(|f| f.in_file) {
            let value = (f.get)(self);
            let empty = match &value {
                Value::Null => true,
                Value::String(s) => s.is_empty(),
                Value::Array(a) => a.is_empty(),
                Value::Object(o) => o.is_empty(),
                _ => false,
            };
            if empty {
                // kubelet's v1beta1 fields are `omitempty`.
                continue;
            }
            let mut parts: Vec<&str> = f.key.split('.').collect();
            let last = parts.pop().unwrap_or(f.key);
            let mut at = &mut root;
            for p in parts {
                let next = at
                    .entry(p.to_string())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !next.is_object() {
                    *next = Value::Object(Map::new());
                }
                at = next.as_object_mut().expect("an object was just put here");
            }
            at.insert(last.to_string(), value);
        }
        serde_json::json!({ "kubeletconfig": root })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configz_serves_each_file_field_as_the_file_writes_it() {
        let mut c = KubeletConfig::default();
        c.system_reserved.memory_bytes = Some(100 << 20);
        c.system_reserved.cpu_millis = Some(250);
        c.kubeconfig = Some(PathBuf::from("/etc/kubelet.conf"));
        let z = c.configz();
        let k = &z["kubeletconfig"];
        assert_eq!(k["maxPods"], 110);
        assert_eq!(k["syncFrequency"], "1m0s");
        assert_eq!(k["nodeStatusReportFrequency"], "5m0s");
        assert_eq!(k["containerLogMaxSize"], "10Mi");
        assert_eq!(k["nodeStatusMaxImages"], 50);
        assert_eq!(k["evictionHard"]["memory.available"], "100Mi");
        assert_eq!(k["evictionHard"]["nodefs.available"], "10%");
        assert_eq!(k["enforceNodeAllocatable"], serde_json::json!(["pods"]));
        assert_eq!(k["systemReserved"]["memory"], "100Mi");
        assert_eq!(k["systemReserved"]["cpu"], "250m");
        assert!(
            k.get("kubeReserved").is_none(),
            "nothing reserved: left out"
        );
        assert_eq!(k["authentication"]["webhook"]["enabled"], true);
        assert_eq!(k["authentication"]["webhook"]["cacheTTL"], "2m0s");
        assert_eq!(k["authorization"]["mode"], "Webhook");
        assert_eq!(k["logging"]["verbosity"], 0);
        assert_eq!(k["cgroupDriver"], "cgroupfs");
        assert_eq!(k["memorySwap"]["swapBehavior"], "NoSwap");
        assert!(
            k.get("kubeconfig").is_none(),
            "flag-only settings are no field"
        );
        assert!(k.get("rootDir").is_none());
        assert!(k.get("tlsCertFile").is_none(), "unset: left out");
        assert!(k.get("clusterDNS").is_none(), "empty: left out");
        assert!(k.get("evictionSoft").is_none(), "empty: left out");
    }
}
