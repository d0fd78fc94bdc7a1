use super::*;

#[test]
fn counts_of_the_issue_examples() {
    let m = Machine::from_spec("pack:4 numa:1 l3:1 core:8 pu:2").unwrap();
    assert_eq!((m.pu_count(), m.cores(), m.packages(), m.numa_count()), (64, 32, 4, 4));
    assert_eq!(m.pu_numa[15], 0);
    assert_eq!(m.pu_numa[16], 1);
    let m = Machine::from_spec("numa:3 pu:1").unwrap();
    assert_eq!((m.pu_count(), m.cores(), m.numa_count()), (3, 0, 3));
    assert_eq!(m.distances[0][1], DISTANCE_FAR);
}

#[test]
fn canonical_form_reparses_to_itself() {
    for s in
        ["pack:4 numa:1 l3:1 core:8 pu:2", "pack:4 numa:2 l3:1 l2:4 core:2 pu:1", "numa:2 pu:1", "pack:2 core:2 pu:2"]
    {
        let a = Machine::from_spec(s).unwrap().synthetic().unwrap();
        let b = Machine::from_spec(&a).unwrap().synthetic().unwrap();
        assert_eq!(a, b, "{s}");
    }
}

#[test]
fn presets_build_with_the_seed_shapes() {
    let m = Machine::from_spec("sammu").unwrap();
    assert_eq!((m.pu_count(), m.cores(), m.packages(), m.numa_count()), (64, 32, 4, 4));
    // Linux numbering: both hardware threads of logical core 0 are OS 0 and 32.
    assert_eq!((m.pu_os_index(0), m.pu_os_index(1), m.pu_os_index(2)), (0, 32, 1));
    let m = Machine::from_spec("stmap-xeon").unwrap();
    assert_eq!((m.pu_count(), m.cores(), m.numa_count()), (192, 96, 8));
    let m = Machine::from_spec("stmap-opteron").unwrap();
    assert_eq!((m.pu_count(), m.packages(), m.numa_count()), (64, 4, 8));
    assert_eq!(m.distances[0][1], DISTANCE_NEAR);
    assert_eq!(m.distances[0][2], DISTANCE_FAR);
    let m = Machine::from_spec("ace").unwrap();
    assert_eq!(m.cost.g, Some(2.0));
    for p in presets::PRESETS {
        Machine::from_spec(p.name).unwrap().cost.validate().unwrap();
    }
}

#[test]
fn bad_descriptions_get_one_clear_line() {
    for (spec, expect) in [
        ("pack:x pu:1", "bad count"),
        ("bogus:2 pu:1", "unknown object type 'bogus'"),
        ("pack:2 core:3", "last level must be PU"),
        ("core:0 pu:1", "0 objects"),
        ("machine:2 pu:1", "Machine level"),
        ("pack:2 numa:1 core:2 numa:1 pu:2", "several NUMA levels"),
        ("nonsense", "unknown machine"),
        ("missing.xml", "no such file"),
        ("pack:2 pu:2(indexes=0,1,2)", "indexes"),
    ] {
        let e = Machine::from_spec(spec).unwrap_err().to_string();
        assert!(e.contains(expect), "{spec}: {e}");
        assert!(!e.contains('\n'));
    }
}

#[test]
fn xml_round_trip_of_a_small_topology() {
    let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<topology version="2.0">
  <object type="Machine" os_index="0">
    <object type="Package" os_index="0">
      <object type="NUMANode" os_index="1" local_memory="1000"/>
      <object type="L2Cache" cache_size="4194304" depth="2" cache_type="0">
        <object type="Core" os_index="0"><object type="PU" os_index="3"/></object>
        <object type="Core" os_index="1"><object type="PU" os_index="2"/></object>
      </object>
    </object>
    <object type="Package" os_index="1">
      <object type="NUMANode" os_index="0" local_memory="1000"/>
      <object type="L2Cache" cache_size="4194304" depth="2" cache_type="0">
        <object type="Core" os_index="0"><object type="PU" os_index="1"/></object>
        <object type="Core" os_index="1"><object type="PU" os_index="0"/></object>
      </object>
    </object>
  </object>
  <distances2 type="NUMANode" nbobjs="2" kind="5" indexing="os">
    <indexes length="4">0 1</indexes>
    <u64values length="6">10 30 30 10</u64values>
  </distances2>
</topology>"#;
    let m = Machine::from_xml(xml, "test.xml").unwrap();
    assert_eq!((m.pu_count(), m.cores(), m.packages(), m.numa_count()), (4, 4, 2, 2));
    // Siblings are ordered by their lowest PU OS index, as hwloc does: the second package
    // (PUs 1 and 0) comes first, with its NUMA node (OS index 0).
    assert_eq!((0..4).map(|i| m.pu_os_index(i)).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    assert_eq!(m.tree.numa[0].os_index, 0);
    assert_eq!(m.pu_numa, vec![0, 0, 1, 1]);
    assert_eq!(m.distances[0][1], 30);
    assert_eq!(m.distance_origin, "hwloc");
    assert_eq!(m.synthetic().unwrap(), "Package:2 [NUMANode(memory=1000)] L2Cache:1(size=4194304) Core:2 PU:1");
}

#[test]
fn xml_caches_carry_ways_and_line_size() {
    let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<topology version="2.0">
  <object type="Machine" os_index="0">
    <object type="NUMANode" os_index="0" local_memory="1000"/>
    <object type="L3Cache" cache_size="18874368" depth="3" cache_linesize="64" cache_associativity="24" cache_type="0">
      <object type="L1Cache" cache_size="32768" depth="1" cache_linesize="64" cache_associativity="-1" cache_type="1">
        <object type="Core" os_index="0"><object type="PU" os_index="0"/></object>
      </object>
      <object type="L1Cache" cache_size="32768" depth="1" cache_linesize="0" cache_associativity="0" cache_type="1">
        <object type="Core" os_index="1"><object type="PU" os_index="1"/></object>
      </object>
    </object>
  </object>
</topology>"#;
    let m = Machine::from_xml(xml, "test.xml").unwrap();
    let caches: Vec<_> = m.tree.objs.iter().filter(|o| o.ty.is_cache()).map(|o| (o.cache_ways, o.cache_line)).collect();
    // -1 is fully associative (0 ways here); 0 is unknown, as hwloc writes them.
    assert_eq!(caches, vec![(Some(24), Some(64)), (Some(0), Some(64)), (None, None)]);
    let bad = xml.replace(r#"cache_associativity="24""#, r#"cache_associativity="many""#);
    let e = Machine::from_xml(&bad, "test.xml").unwrap_err();
    assert!(e.to_string().contains("test.xml:5") && e.to_string().contains("cache_associativity"), "{e}");
    assert_eq!(e.kind, crate::MachineErrorKind::Xml);
}

/// Values that do not fit are refused, naming the file and line; an empty or binary file
/// is named as such, never read as a synthetic string.
#[test]
fn machine_files_out_of_range_empty_or_binary_are_named() {
    let d = tempfile::tempdir().unwrap();
    let xml = |pu: &str| {
        format!(
            "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n<object type=\"Machine\" os_index=\"0\">\n<object type=\"Package\" os_index=\"0\">\n<object type=\"Core\" os_index=\"0\">\n<object type=\"PU\" os_index=\"{pu}\"/>\n</object></object></object></topology>\n"
        )
    };
    let path = d.path().join("big.xml");
    std::fs::write(&path, xml("99999999999999")).unwrap();
    let err = Machine::from_spec(path.to_str().unwrap()).unwrap_err().to_string();
    assert!(err.contains("big.xml:6") && err.contains("out of range"), "{err}");
    std::fs::write(&path, xml("4294967295")).unwrap();
    assert_eq!(Machine::from_spec(path.to_str().unwrap()).unwrap().pu_os_index(0), u32::MAX);
    for (name, bytes) in [("empty.xml", &b""[..]), ("blank", &b"  \n"[..]), ("binary.xml", &[0xff, 0xfe, 0, 1][..])] {
        let path = d.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let err = Machine::from_spec(path.to_str().unwrap()).unwrap_err().to_string();
        assert!(err.starts_with(path.to_str().unwrap()) && !err.contains("synthetic topology \"\""), "{name}: {err}");
    }
}
