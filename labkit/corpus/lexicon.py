"""Slot lexicons for the news generator: places, names, organisations, things.

Lists are combined (brand x industry, surname x given name) so that a few
hundred words give tens of thousands of distinct slot values: a tiny model
must learn to *copy* slots from the body rather than memorise them.
"""

from __future__ import annotations

CITIES = (
    "北京 上海 广州 深圳 天津 重庆 杭州 南京 苏州 成都 武汉 西安 长沙 郑州 济南 青岛 "
    "合肥 福州 厦门 南昌 昆明 贵阳 南宁 海口 兰州 西宁 银川 乌鲁木齐 拉萨 呼和浩特 "
    "太原 石家庄 沈阳 大连 长春 哈尔滨 宁波 温州 无锡 常州 徐州 烟台 潍坊 洛阳 "
    "宜昌 襄阳 株洲 岳阳 赣州 泉州 佛山 东莞 珠海 汕头 桂林 绵阳 遵义 大理 "
    "保定 唐山 邯郸 鞍山 吉林 齐齐哈尔 扬州 绍兴 嘉兴 芜湖"
).split()

BRANDS = (
    "华信 远航 中科 星辰 蓝海 瑞丰 鼎盛 宏达 天成 恒通 新元 博雅 安泰 金桥 "
    "云帆 锦程 汇智 长风 凯越 东方 北辰 海纳 晨光 卓越 正和 九州 启明 融创 "
    "百川 鸿图 泰和 永兴 龙腾 华章 嘉禾 明德 信达 领航 盛世 银河"
).split()

INDUSTRIES = ("科技 电子 汽车 物流 能源 医药 食品 材料 通信 软件 银行 证券 地产 航空 重工").split()

SURNAMES = "王 李 张 刘 陈 杨 黄 赵 吴 周 徐 孙 马 朱 胡 郭 何 高 林 罗 郑 梁 谢 宋 唐 许 韩 冯 邓 曹".split()

GIVEN = (
    "伟 芳 娜 敏 静 丽 强 磊 军 洋 勇 艳 杰 涛 明 超 秀兰 霞 平 刚 桂英 建华 "
    "志强 海燕 晓东 雪梅 文博 子涵 宇航 欣怡 浩然 思远 佳琪 俊杰 雨桐 国栋 "
    "立新 春生 玉兰 振华 学军 红梅 永刚 晓燕 德明 丽娟 建国 秋云 嘉怡 天佑"
).split()

PRODUCTS = (
    "新能源汽车 智能手机 锂电池 光伏组件 工业机器人 芯片 无人机 智能手表 "
    "服务器 医疗器械 储能设备 充电桩 传感器 平板电脑 智能家电 数控机床"
).split()

FIELDS = (
    "量子计算 人工智能 新材料 基因编辑 固态电池 深海探测 卫星通信 生物医药 氢能 高性能计算 脑机接口 柔性显示"
).split()

TEAM_NAMES = "雄狮 猛虎 飞龙 海鹰 火箭 骏马 蛟龙 苍狼 神鹰 勇士".split()

SPORT_EVENTS = (
    "全国游泳锦标赛 全国田径锦标赛 乒乓球公开赛 羽毛球公开赛 全国举重锦标赛 "
    "射击世界杯 体操全国锦标赛 网球公开赛 全国跳水锦标赛"
).split()

SPORT_ITEMS = (
    "男子100米 女子200米自由泳 男子单打 女子单打 男子10米气步枪 女子跳远 男子双打 女子平衡木 男子铅球 女子3米跳板"
).split()

WARNING_COLORS = "蓝色 黄色 橙色 红色".split()

HAZARDS = "暴雨 大风 寒潮 雷电 大雾 冰雹 道路结冰".split()

SURGERIES = (
    "机器人辅助心脏手术 达芬奇机器人肝切除术 人工耳蜗植入手术 "
    "微创脊柱手术 肾脏移植手术 经导管主动脉瓣置换术 3D打印骨盆重建手术"
).split()

CHECKUPS = "健康体检 眼科筛查 口腔检查 骨密度检测 慢病筛查 儿童视力检查".split()

DISEASES = "流感 手足口病 诺如病毒感染 支原体肺炎 登革热".split()

SUBJECTS = "人工智能 集成电路 临床医学 新能源 数据科学 智能制造 现代农业 网络安全".split()

MUSEUMS = "博物馆 美术馆 图书馆 科技馆 档案馆".split()

EXHIBITS = ("青铜器 敦煌壁画 宋代瓷器 明清书画 丝绸之路文物 古代钱币 非遗刺绣 良渚玉器 汉代漆器 民国老照片").split()

FILMS = (
    "长风破浪 山河故人 星河守望 归途 追光者 逆风而行 远方的家 千里江山 热血少年 大漠孤烟 城南旧事 海上明月"
).split()

FESTIVALS = "国际音乐节 戏剧节 灯会 美食节 读书节 国际电影节 风筝节 龙舟节".split()

CROPS = "小麦 水稻 玉米 大豆 油菜 茶叶 柑橘 苹果 棉花 马铃薯".split()

CRIMES = "电信诈骗 非法集资 网络赌博 走私 制售假药 侵犯公民个人信息".split()

CASES = "合同纠纷 知识产权侵权 环境污染 劳动争议 商标侵权 网络侵权".split()

TREES = "樟树 银杏 柳树 国槐 水杉 杨树 桂花树".split()
