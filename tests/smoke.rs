use tensordesc::*;

#[test]
fn smoke() {
    let d = TensorBuilder::row_major(ElementType::Float32, &[4, 8])
        .build()
        .unwrap();
    let b = d.encode().unwrap();
    assert_eq!(decode(&b, Mode::Strict).unwrap(), d);
    let regions = vec![
        RegionSpec::new(&[0, 0], &[8, 4], NodeSpec::row_major()),
        RegionSpec::new(&[0, 4], &[8, 4], NodeSpec::csr(5, 3)),
    ];
    let d = TensorBuilder::subpaving(ElementType::Float32, &[8, 8], regions)
        .build()
        .unwrap();
    let b = d.encode().unwrap();
    let d2 = decode(&b, Mode::Strict).unwrap();
    assert_eq!(d2, d);
    println!("{:?}", d.locate(&[3, 5]).unwrap());
    println!("{:?}", d.locate(&[3, 1]).unwrap());
    for i in 0..4 {
        println!("{:?}", d.buffer_info(i));
    }
}
