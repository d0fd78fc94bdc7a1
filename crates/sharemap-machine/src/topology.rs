//! Object types and the object tree shared by every way of describing a machine.

use serde::Serialize;

/// The hwloc object types sharemap models (I/O and Misc objects are ignored).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum ObjType {
    Machine,
    Package,
    Die,
    Group,
    /// Cache of `level` holding data (`Unified`), data only or instructions only.
    Cache {
        level: u8,
        kind: CacheKind,
    },
    Core,
    Pu,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum CacheKind {
    Unified,
    Data,
    Instruction,
}

impl ObjType {
    /// hwloc's canonical type name, as `lstopo --of synthetic` prints it.
    pub fn hwloc_name(self) -> String {
        match self {
            ObjType::Machine => "Machine".into(),
            ObjType::Package => "Package".into(),
            ObjType::Die => "Die".into(),
            ObjType::Group => "Group".into(),
            ObjType::Core => "Core".into(),
            ObjType::Pu => "PU".into(),
            ObjType::Cache { level, kind } => {
                let k = match kind {
                    CacheKind::Unified => "",
                    CacheKind::Data => "d",
                    CacheKind::Instruction => "i",
                };
                format!("L{level}{k}Cache")
            }
        }
    }

    pub fn is_cache(self) -> bool {
        matches!(self, ObjType::Cache { .. })
    }

    /// hwloc's default size for a synthetic cache of this level.
    pub fn default_cache_size(level: u8) -> u64 {
        match level {
            1 => 32 << 10,
            2 => 4 << 20,
            3 => 16 << 20,
            4 => 64 << 20,
            _ => 256 << 20,
        }
    }
}

/// One object of the tree. Children are in logical order.
#[derive(Clone, Debug)]
pub struct Obj {
    pub ty: ObjType,
    pub parent: Option<usize>,
    pub children: Vec<usize>,
    pub os_index: Option<u32>,
    pub cache_size: Option<u64>,
    /// Ways of a cache (0: fully associative), when the description gives them (hwloc XML).
    pub cache_ways: Option<u32>,
    /// Line size of a cache in bytes, when given (hwloc XML).
    pub cache_line: Option<u32>,
    /// Indexes into `Machine::numa_nodes` of the NUMA nodes attached here (hwloc memory children).
    pub memory: Vec<usize>,
}

/// A NUMA node: a memory attached to an object of the tree.
#[derive(Clone, Debug, Serialize)]
pub struct NumaNode {
    pub os_index: u32,
    /// Bytes, when known.
    pub memory: Option<u64>,
    /// The object it is attached to (index into the object arena).
    #[serde(skip)]
    pub attached_to: usize,
    /// Logical indexes of the PUs local to this node.
    pub pus: Vec<usize>,
}

/// A tree under construction: objects plus NUMA nodes, before levels are derived.
#[derive(Clone, Debug, Default)]
pub struct Tree {
    pub objs: Vec<Obj>,
    pub numa: Vec<NumaNode>,
}

impl Tree {
    pub fn add(&mut self, ty: ObjType, parent: Option<usize>) -> usize {
        let id = self.objs.len();
        self.objs.push(Obj {
            ty,
            parent,
            children: Vec::new(),
            os_index: None,
            cache_size: None,
            cache_ways: None,
            cache_line: None,
            memory: Vec::new(),
        });
        if let Some(p) = parent {
            self.objs[p].children.push(id);
        }
        id
    }

    /// `o` and its ancestors up to the root, nearest first.
    pub fn ancestors(&self, mut o: usize) -> Vec<usize> {
        let mut v = vec![o];
        while let Some(p) = self.objs[o].parent {
            v.push(p);
            o = p;
        }
        v
    }

    pub fn attach_numa(&mut self, obj: usize, os_index: u32, memory: Option<u64>) {
        let id = self.numa.len();
        self.numa.push(NumaNode { os_index, memory, attached_to: obj, pus: Vec::new() });
        self.objs[obj].memory.push(id);
    }
}
